"""The date every render in the tests, the snapshots (tools/update_snapshots.py) and the real
tier is checked as of: a fixed one, so that no test turns red on the day a support window ends
and a snapshot stays what the code makes of it. The catalog's date (the day the facts were last
read): refreshing the facts moves it, and a shipped stack whose window ended by then fails."""

from __future__ import annotations

from gpu_cluster.config.dates import AsOf
from gpu_cluster.facts.gcp_catalog import CATALOG_DATE

AS_OF = AsOf(CATALOG_DATE, pinned=True)

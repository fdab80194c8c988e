"""Pure decisions: what to build from validated settings. No Pulumi imports here."""

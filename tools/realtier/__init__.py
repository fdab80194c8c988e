"""The real tier: upstream tools built from the Go module proxy, and a control plane on loopback.

`python -m tools.realtier build` builds (or finds cached) every tool the tier's tests use;
`python -m tools.realtier up` starts the control plane with fake GPU nodes for a person.
"""

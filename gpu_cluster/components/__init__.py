"""Pulumi ComponentResources: reusable pieces and the two platforms composed from them."""

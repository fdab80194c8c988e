"""Stack config: the one schema of Pulumi.<stack>.yaml (pydantic) and reading it from Pulumi."""

"""The stack config's sections, one module per concern; config/schema.py holds the root."""

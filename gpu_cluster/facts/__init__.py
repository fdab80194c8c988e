"""Vendor facts both the config schema and the plan read: published limits, releases and
catalogs, each with its source. Imports nothing from the rest of the package."""

"""iceberg_facets: Iceberg commit and scan metrics as OpenLineage facets, for Spark and for pyiceberg.

The Spark side and the pyiceberg side arrive with their own issues; dataset naming is shared with
:mod:`spark_lineage.naming`, so both engines give one table one name.
"""

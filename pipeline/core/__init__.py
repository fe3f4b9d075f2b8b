"""The bottom layer: the schema, the config, errors, atomic files and fixed-bytes Parquet,
progress, and the release's file names. It imports nothing else of the package."""

"""Reading the input: sources (files, folders, ``hf://``), the split tar.gz archive, gzip,
the unarXive record layouts, and the synthetic mark a record may carry."""

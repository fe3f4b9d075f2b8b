"""The release as the Hub shows it: the dataset card (rendered by the release stage) and
``push``. The Jobs that build it on the Hub are :mod:`pipeline.jobs`, above the API."""

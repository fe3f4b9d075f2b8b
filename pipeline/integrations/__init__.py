"""The release as other tools' tasks: MTEB's (:mod:`pipeline.integrations.mteb`), its
leaderboard-sized lite variant (:mod:`pipeline.integrations.mteb_lite`) and the bundle a
pull request to MTEB's repository carries (:mod:`pipeline.integrations.mteb_bundle`).

Importing a module here imports no optional library: MTEB, torch and sentence-transformers
are imported when a task is built or evaluated.
"""

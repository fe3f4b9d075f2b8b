"""Retrieval mode: a run over a split's whole corpus scored with trec_eval's rule
(:mod:`.mode`), and the runs the evaluation builds for a model (:mod:`.model_runs`) from the
corpus's cached vectors (:mod:`.corpus_vectors`) by one of the search engines: exact
(:mod:`.exact`), faiss HNSW (:mod:`.faiss_index`) or the user's Qdrant collection
(:mod:`.qdrant_index`)."""

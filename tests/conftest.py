"""Shared fixtures: real unarXive records copied into tests/fixtures (see SOURCE.md)."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pytest

from pipeline.evaluate.systems.dense import DENSE_SWITCH

# The dense baseline (the optional .[dense] extra) is off in every test, subprocesses
# included: results are the same whether or not the extra is installed, and no test
# loads the real model.
os.environ[DENSE_SWITCH] = "0"
# No test looks OpenAlex up on the network: a key in the developer's environment is dropped
# (the OpenAlex tests set one, pointing at the local stub).
os.environ.pop("OPENALEX_API_KEY", None)
os.environ.pop("OPENALEX_URL", None)

FIXTURES = Path(__file__).parent / "fixtures"
SAMPLE_2022 = FIXTURES / "unarxive-2022-sample" / "arXiv_src_2212_086.jsonl.gz"
PREVIEW_2024 = FIXTURES / "unarxive-2024-preview" / "preview.jsonl"
SURVEY_ID = "2212.11774"


@pytest.fixture(scope="session")
def sample_lines() -> list[bytes]:
    """The 49 real 2022-layout records, one JSON line each."""
    with gzip.open(SAMPLE_2022, "rb") as f:
        return [line.rstrip(b"\n") for line in f if line.strip()]


@pytest.fixture(scope="session")
def sample_records(sample_lines: list[bytes]) -> list[dict]:
    return [json.loads(line) for line in sample_lines]


# --------------------------------------------------------------------- the fast suite
# `make test-fast` (`pytest -m "not slow"`) is the inner loop; `make test` and CI run every
# test. Marked slow here, in one place: whole modules that run the pipeline end to end, any
# test on the synthetic release (built once per session: a pipeline run of its own), and
# single tests of other modules that take more than about a second.
SLOW_MODULES = frozenset(
    {
        "test_archive",
        "test_attack_battery_a",
        "test_attack_battery_b",
        "test_bad_inputs",
        "test_batch_sizes",
        "test_cli_errors",
        "test_corpus_sections",
        "test_ecosystem",
        "test_evaluate_e2e",
        "test_external_model",
        "test_figures",
        "test_full_text_eval",
        "test_hostile_readers",
        "test_hub",
        "test_jobs_local",
        "test_layout_consistency",
        "test_mteb_integration",
        "test_real_survey_trees",
        "test_scale_corpus",
        "test_turso_remote",
        "test_verify",
        "test_wheel",
    }
)
# fixtures that hand a test the synthetic release (tests.test_negatives.synthetic_release_dir)
# or build a demo release
SLOW_FIXTURES = frozenset({"synthetic_release", "release", "demo_release"})
SLOW_TESTS: dict[str, frozenset[str]] = {
    "test_bibliography": frozenset({"test_real_raw_strings_resolve_by_title_alone"}),
    "test_api": frozenset(
        {
            "test_extract_reduce_and_status_return_typed_results",
            "test_no_caller_reenters_the_cli_with_argv",
            "test_a_script_without_a_main_guard_runs_with_workers",
        }
    ),
    "test_aspects": frozenset(
        {
            "test_real_survey_aspects_are_its_topical_subsections",
            "test_a_lower_minimum_makes_more_aspects",
            "test_the_2024_layout_keeps_merged_headings_as_one_aspect",
        }
    ),
    "test_card": frozenset({"test_the_card_command_works_on_the_downloaded_dataset"}),
    "test_hostile_openalex": frozenset(
        {
            "test_an_empty_snapshot_is_refused_then_the_real_one_describes_every_work",
            "test_a_50_mb_answer_is_read_no_further_than_the_limit",
        }
    ),
    "test_openalex": frozenset(
        {
            "test_demo_shows_the_records_of_its_works_file",
            "test_kill_minus_9_during_the_lookups_then_rerun_asks_only_the_rest",
            "test_stage_on_the_real_record_and_a_rerun_asks_nothing",
            "test_no_key_no_snapshot_builds_and_says_how_many_were_not_looked_up",
            "test_service_down_still_builds",
        }
    ),
    "test_cli_out": frozenset(
        {
            "test_every_command_that_writes_takes_out_and_writes_there_only",
            "test_old_spellings_still_work_with_a_warning",
        }
    ),
    "test_common": frozenset({"test_same_named_files_in_two_folders_keep_one_copy"}),
    "test_concurrent_runs": frozenset({"test_identical_runs_started_together_end_as_one_run"}),
    "test_config": frozenset(
        {
            "test_every_invalid_value_fails_at_load_with_rc_2_and_one_line",
            "test_bad_config_refused_before_any_stage_in_a_subprocess",
        }
    ),
    "test_evaluate_metrics": frozenset(
        {
            "test_vectorised_tie_keys_match_the_reference",
            "test_row_order_invariance_with_ties",
            "test_random_hard_negative_auc_is_half",
            "test_oracle_reaches_every_bound",
            "test_agrees_with_pytrec_eval_property",
        }
    ),
    # trec_eval and ir_measures each answer in a fresh interpreter (tests/trec_reference.py)
    "test_evaluate_retrieval": frozenset(
        {
            "test_every_reported_metric_equals_ir_measures",
            "test_hard_negative_auc_compares_judged_pairs_only",
            "test_depth_changes_recall_and_ap_as_trec_eval_does",
            "test_a_survey_without_rows_scores_zero",
        }
    ),
    # every command of the docs, each in a fresh interpreter, on a demo built for it
    "test_documented_commands": frozenset({"test_every_documented_command_runs_as_written"}),
    "test_extract_layouts": frozenset({"test_both_layouts_same_references_and_mention_totals"}),
    "test_files": frozenset(
        {
            "test_a_concurrent_cleanup_keeps_an_evaluations_temp_files",
            "test_one_atomic_writer_and_one_file_hash",
        }
    ),
    "test_inputs_hostile": frozenset(
        {
            "test_a_failed_gzip_file_reports_the_lines_and_bytes_it_decoded",
            "test_entries_that_are_not_regular_files_are_counted_failed_inputs",
        }
    ),
    "test_labels": frozenset({"test_hand_made_config_variants"}),
    "test_negatives": frozenset({"test_seed_changes_the_draw_and_output_is_reproducible"}),
    "test_release": frozenset(
        {
            "test_two_runs_give_identical_release_files",
            "test_real_sample_survey_in_train_without_negatives",
            "test_the_relative_audit_and_the_probe_fail_the_build_in_error_mode",
            "test_release_fails_on_a_repeated_pair",
            "test_split_by_survey_date",
            "test_split_fails_when_a_negative_postdates_its_survey",
            "test_prior_citations_in_domain_and_citing_surveys_by_hand",
        }
    ),
    # a subprocess against a loopback Qdrant, a whole evaluation with query vectors
    "test_hostile_retrieval": frozenset(
        {
            "test_a_qdrant_server_quoting_the_api_key_never_shows_it",
            "test_query_vectors_of_other_splits_are_counted_and_the_rest_evaluated",
        }
    ),
    "test_rank": frozenset({"test_retrieval_mode_agrees_with_pytrec_eval"}),
    # an evaluate process killed while it encodes, then a rerun
    "test_retrieval_search": frozenset(
        {
            "test_kill_minus_9_while_encoding_then_rerun_encodes_only_the_missing_batches",
            "test_bm25_baseline_and_scorers_over_the_whole_corpus",
            "test_faiss_index_reports_its_recall_against_exact_and_is_cached",
            "test_dense_baseline_retrieves_over_the_corpus_where_it_can_run",
            "test_an_unreachable_qdrant_server_is_one_line_and_its_api_key_is_never_printed",
        }
    ),
    "test_roles": frozenset({"test_roles_command_stdin"}),
    "test_runner": frozenset(
        {
            "test_workers_die_with_the_main_process",
            "test_shards_partition_the_sorted_files",
            "test_kill_minus_9_then_resume_is_byte_identical",
            "test_rerun_skips_and_force_redoes",
            "test_shards_with_different_input_lists_are_refused",
            "test_later_stages_wait_for_every_shard",
            "test_changed_input_or_config_redoes_that_file",
            "test_the_runner_and_the_jobs_judge_an_input_done_alike",
        }
    ),
    "test_surveys": frozenset({"test_rule_change_reruns_surveys_and_later_only"}),
    "test_synth": frozenset({"test_real_section_structures", "test_survey_share_and_traps"}),
    "test_works": frozenset({"test_real_sample", "test_one_work_id_across_doi_openalex_and_arxiv"}),
}


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the slow tests (above); refuse a name in SLOW_TESTS that its module lacks."""
    seen: set[tuple[str, str]] = set()
    for item in items:
        module = item.module.__name__.rpartition(".")[2]  # type: ignore[attr-defined]
        name = getattr(item, "originalname", item.name)
        seen.add((module, name))
        if (
            module in SLOW_MODULES
            or name in SLOW_TESTS.get(module, ())
            or SLOW_FIXTURES.intersection(item.fixturenames)  # type: ignore[attr-defined]
        ):
            item.add_marker(pytest.mark.slow)
    if any("::" in arg for arg in config.args):
        return  # single tests named: their modules are not collected whole
    modules = {m for m, _ in seen}
    missing = [f"{m}::{n}" for m in modules for n in SLOW_TESTS.get(m, ()) if (m, n) not in seen]
    if missing:
        raise pytest.UsageError(f"tests/conftest.py SLOW_TESTS names no such test: {missing}")


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No Hub access for datasets, and a datasets cache of the test's own."""
    import datasets

    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True, raising=False)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_OFFLINE", True, raising=False)
    # datasets reads HF_DATASETS_CACHE when it is imported: MTEB's loads need the attribute
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf-cache")
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "hf-cache"))
    return tmp_path / "hf-cache"

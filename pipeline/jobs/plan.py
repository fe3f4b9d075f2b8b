"""How long extract takes on a Job flavour, from ``make bench``'s figures, and what the
OpenAlex lookups of a run would ask."""

from __future__ import annotations

from pathlib import Path
from typing import Any

# `make bench`'s figures on its real-record corpus (bench/results/extract.json, "real",
# which a Job's code upload does not ship: tests/test_docs.py checks these equal it): the
# real records cost more per MB to decompress and less to extract than the synthetic bench
# corpus, and compress about as the published parts do. Flavours' vCPUs are the Hub's
# published sizes, not checked here (`HfApi().list_jobs_hardware()`).
GZIP_MB_S = 756.1  # the archive reader (parts, ISA-L, tar members), one core, MB of JSONL/s
EXTRACT_MB_S_PER_WORKER = 666.6  # extract, one worker, MB of JSONL per second
ARCHIVE_RATIO = 371 / 105  # unarXive 2024: 371 GB of JSONL in 105 GB of parts
MOUNT_MB_S = 200.0  # assumed read rate of the /data mount: not documented, not measured
PUBLISHED_ARCHIVE_GB = 104.8  # the three parts' sizes on the Hub (39.8 + 39.8 + 25.2 GB)
FLAVOR_VCPUS = {"cpu-basic": 2, "cpu-upgrade": 8, "cpu-performance": 8, "cpu-xl": 16}


def input_summary(input_spec: str) -> dict[str, Any]:
    """What ``--input`` names: its archives with their parts, and its JSONL files."""
    from pipeline.corpus.sources import display, resolve_inputs

    found = resolve_inputs([input_spec])
    archives = [
        {
            "name": display(f.name),
            "bytes": f.size,
            "parts": [
                {"name": display(p.name), "bytes": p.size, "sha256": p.sha256 or None}
                for p in f.parts
            ],
        }
        for f in found
        if f.is_archive
    ]
    plain = [f for f in found if not f.is_archive]
    return {
        "input": input_spec,
        "archives": archives,
        "jsonl_files": len(plain),
        "jsonl_bytes": sum(f.size for f in plain),
    }


def extract_projection(
    archive_bytes: int, flavor: str, fan_out: int = 1, workers: int | None = None
) -> dict[str, Any]:
    """Projected wall time of extract over ``archive_bytes`` of tar.gz parts: every Job
    reads and decompresses the whole stream (one core), its other cores decode its
    units; the slowest of reading, decompressing and decoding sets the pace."""
    vcpus = FLAVOR_VCPUS.get(flavor, 2)
    decoders = workers or max(1, vcpus - 1)
    jsonl = archive_bytes * ARCHIVE_RATIO
    mount_s = archive_bytes / (MOUNT_MB_S * 1e6)
    read_s = jsonl / (GZIP_MB_S * 1e6)
    decode_s = jsonl / max(fan_out, 1) / (EXTRACT_MB_S_PER_WORKER * 1e6 * decoders)
    return {
        "flavor": flavor,
        "vcpus": vcpus,
        "decoding_workers": decoders,
        "jsonl_gb": round(jsonl / 1e9, 1),
        "read_hours": round(mount_s / 3600, 2),
        "decompress_hours": round(read_s / 3600, 2),
        "decode_hours_per_job": round(decode_s / 3600, 2),
        "projected_hours": round(max(mount_s, read_s, decode_s) / 3600, 2),
        "rates": {
            "mount_mb_s_assumed": MOUNT_MB_S,
            "gzip_mb_s": GZIP_MB_S,
            "extract_mb_s_per_worker": EXTRACT_MB_S_PER_WORKER,
            "source": "make bench on the 2-core development machine, not measured on Jobs",
        },
    }


def openalex_projection(works_dir: Path | None, cfg: Any) -> dict[str, Any]:
    """The calls, cost and time of the OpenAlex lookups a run would ask, counted from the
    finished ``works`` table and lookup cache of ``works_dir`` (a work directory: the
    bucket's, or a run of the same input elsewhere); what is needed, when there is none."""
    from pipeline.engine import workdir as W
    from pipeline.stages.openalex import works_projection

    if works_dir is None:
        return {
            "not_projected": "no work directory with a finished works stage: pass "
            "--lookups-from OUT (the distinct works are known only once works has run)"
        }
    works = W.reduce_output(works_dir, "works", "works")
    if not W.reduce_finished(works_dir, "works") or not works.is_file():
        return {"not_projected": f"openalex projection: {works_dir} has no finished works stage"}
    cache = W.cache_dir(works_dir, "openalex")
    return {"works_dir": str(works_dir), **works_projection(works, cache, cfg)}

"""A LightGBM text model that ``python -m pipeline train`` did not write: its features by name.

A foreign model carries its own feature names (``feature_names=`` in the text header), so
nothing beside it is needed to know what it reads. Each name is looked up as a column of the
feature sources (:mod:`pipeline.evaluate.external.sources`) under the same name, or under the
name ``--feature-map FILE.toml`` gives it (``model_feature = "source column"``). The text is
checked by :func:`pipeline.rank.lgbm_text.check_model_text` before LightGBM parses it (a
damaged file would crash the process), and gain importance is read from the booster.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pipeline.core.errors import PipelineError
from pipeline.rank.lgbm_text import ModelTextError, check_model_text
from pipeline.rank.model import meta_path


class ForeignModelError(PipelineError, ValueError):
    """A foreign model file or its feature map cannot be used (one line naming the file)."""


@dataclass(frozen=True)
class ForeignModel:
    """A foreign LightGBM model.

    Attributes:
        path: the model file.
        text: its checked text.
        features: the model's feature names, in the model's order.
        gain: total gain of the splits on each feature (LightGBM's ``importance_type="gain"``).
    """

    path: Path
    text: str
    features: tuple[str, ...]
    gain: dict[str, float]

    def predict(self, matrix: np.ndarray) -> np.ndarray:
        """Scores of the rows of ``matrix`` (columns in :attr:`features` order; NaN = missing,
        which LightGBM routes as the model learned)."""
        import lightgbm as lgb

        booster = lgb.Booster(model_str=self.text)
        return np.asarray(booster.predict(matrix, num_threads=1), dtype=np.float64)


def is_foreign(model_file: Path) -> bool:
    """True when ``model_file`` has no JSON of ``train`` beside it (a model of its own)."""
    return not meta_path(Path(model_file)).is_file()


def load_foreign(model_file: Path) -> ForeignModel:
    """Read and check a foreign model file.

    Raises:
        ForeignModelError: no such file, or not a LightGBM text model this code can score.
    """
    import lightgbm as lgb

    path = Path(model_file)
    if not path.is_file():
        raise ForeignModelError(f"--model-file {path}: model file not found")
    try:
        text = check_model_text(path.read_bytes(), path)
    except ModelTextError as e:
        raise ForeignModelError(f"--model-file {e}") from None
    try:
        booster = lgb.Booster(model_str=text)
    except lgb.basic.LightGBMError as e:
        raise ForeignModelError(f"--model-file {path}: not a LightGBM text model ({e})") from e
    names = tuple(booster.feature_name())
    gains = booster.feature_importance(importance_type="gain")
    return ForeignModel(path, text, names, {n: float(g) for n, g in zip(names, gains, strict=True)})


def read_feature_map(path: Path | None, features: tuple[str, ...]) -> dict[str, str]:
    """``model feature -> source column`` for every feature: ``--feature-map`` where it names
    one, the feature's own name otherwise.

    Raises:
        ForeignModelError: the file is not TOML, a value is not a string, or a key names no
            feature of the model.
    """
    mapping: dict[str, str] = {}
    if path is not None:
        try:
            table = tomllib.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
            raise ForeignModelError(
                f"--feature-map {path}: not a readable TOML file "
                f'({" ".join(str(e).split())[:200]}); expected lines model_feature = "column"'
            ) from None
        for key, value in table.items():
            if not isinstance(value, str):
                raise ForeignModelError(
                    f"--feature-map {path}: {key} = {value!r} is not a column name (a string)"
                )
            if key not in features:
                raise ForeignModelError(
                    f"--feature-map {path}: {key!r} is no feature of the model; its features: "
                    f"{', '.join(features)}"
                )
            mapping[key] = value
    return {name: mapping.get(name, name) for name in features}

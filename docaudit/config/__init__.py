"""Typed configuration with every default in one place (the methods are described in docs/methods.md).

One module per group of settings; every name is importable from ``docaudit.config``."""

from __future__ import annotations

from docaudit.config.audits import BeyondBlindConfig, ContaminationConfig, DatasetTestConfig, SequenceConfig
from docaudit.config.base import (
    API_LOGPROBS,
    API_RETRIES_MAX,
    API_TIMEOUT_MAX,
    ARCHIVE_BYTES_PER_MEMBER,
    ARCHIVE_INFLATE_FLOOR,
    ARCHIVE_INFLATE_RATIO,
    ARCHIVE_MAX_MEMBERS,
    ARCHIVE_MEMBERS_FLOOR,
    CONFIG_MAX_KEY_PARTS,
    CONTROLS_NULL,
    DEFAULT_CLASSIFIER,
    DTYPES,
    EXCERPTS,
    FEATURES,
    MANIFESTS_DIR,
    MAX_DOCUMENT_BYTES,
    NORMS,
    PACKAGE_DIR,
    QUANTIZE,
    READ_JOBS,
    READ_JOBS_MIN_FILES,
    READ_LIMITS,
    SECTIONS,
    check_range,
    setting,
)
from docaudit.config.controls import CONTROLS_PRESETS, ControlsConfig
from docaudit.config.extract import ExtractConfig
from docaudit.config.inputs import (
    GROUP_SEPARATOR,
    HUB_PROBE_SECONDS,
    ID_COLUMNS,
    LABEL_COLUMNS,
    PAIR_COLUMNS,
    TEXT_COLUMNS,
    DatasetConfig,
    FetchConfig,
)
from docaudit.config.lab import TargetConfig, TrapConfig
from docaudit.config.localize import SEGMENT_METHODS, LocalizeConfig
from docaudit.config.methods import DetectorConfig, MetaConfig, ScalingConfig, TrainConfig
from docaudit.config.probes import ENDPOINTS, PROBES, ProbeConfig
from docaudit.config.query import ModelConfig, QueryConfig, RayConfig
from docaudit.config.seed import MAX_SEED, SEED, SEED_HELP

__all__ = [
    "ExtractConfig",
    "ControlsConfig",
    "ENDPOINTS",
    "PROBES",
    "ProbeConfig",
    "CONTROLS_PRESETS",
    "PACKAGE_DIR",
    "CONTROLS_NULL",
    "DEFAULT_CLASSIFIER",
    "MANIFESTS_DIR",
    "NORMS",
    "FEATURES",
    "DTYPES",
    "QUANTIZE",
    "EXCERPTS",
    "API_LOGPROBS",
    "API_TIMEOUT_MAX",
    "API_RETRIES_MAX",
    "MAX_DOCUMENT_BYTES",
    "ARCHIVE_INFLATE_FLOOR",
    "ARCHIVE_INFLATE_RATIO",
    "ARCHIVE_MAX_MEMBERS",
    "ARCHIVE_MEMBERS_FLOOR",
    "ARCHIVE_BYTES_PER_MEMBER",
    "READ_LIMITS",
    "CONFIG_MAX_KEY_PARTS",
    "READ_JOBS",
    "READ_JOBS_MIN_FILES",
    "SECTIONS",
    "SEED",
    "MAX_SEED",
    "SEED_HELP",
    "setting",
    "check_range",
    "TEXT_COLUMNS",
    "LABEL_COLUMNS",
    "ID_COLUMNS",
    "PAIR_COLUMNS",
    "DatasetConfig",
    "GROUP_SEPARATOR",
    "HUB_PROBE_SECONDS",
    "FetchConfig",
    "ModelConfig",
    "QueryConfig",
    "RayConfig",
    "MetaConfig",
    "TrainConfig",
    "DetectorConfig",
    "ScalingConfig",
    "ContaminationConfig",
    "SequenceConfig",
    "DatasetTestConfig",
    "BeyondBlindConfig",
    "TargetConfig",
    "LocalizeConfig",
    "SEGMENT_METHODS",
    "TrapConfig",
]

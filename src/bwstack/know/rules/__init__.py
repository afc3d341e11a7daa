"""Known-bad backend combinations and the predicted verdict of a profile on a GPU arch, before launch.

Rooms: :mod:`~bwstack.know.rules.book` (the rules file ``data/rules.yaml``, its schema, the listing),
:mod:`~bwstack.know.rules.inputs` (what a prediction is made from, and the static imitation of SGLang's
resolution), :mod:`~bwstack.know.rules.kernels` (the committed kernel facts, read) and
:mod:`~bwstack.know.rules.predict` (the prediction and ``bwstack validate``'s warnings; its docstring says
how a verdict is reached). Generating the kernel facts is part of ``bwstack lock``:
:mod:`bwstack.build.lock.kernel_facts`. This module re-exports the rooms' public names.
"""

from __future__ import annotations

from bwstack.know.rules.book import (
    ARCHES,
    DATA,
    FAILURE_CLASSES,
    KV_LAYOUTS,
    MATCH_FIELDS,
    RULES_FILE,
    RULES_SCHEMA,
    Condition,
    Context,
    Matcher,
    Rule,
    RuleBook,
    load_rules,
    parse_rules,
    render_rules_text,
    rules_data,
    rules_schema,
    version_or_none,
)
from bwstack.know.rules.inputs import (
    ProfileInputs,
    canonical,
    config_arch,
    dsa_default,
    dsa_kv_layout,
    is_dsa_model,
    package_versions,
    profile_inputs,
    static_effective,
)
from bwstack.know.rules.kernels import (
    KERNEL_FACTS_FILE,
    KERNEL_FACTS_SCHEMA,
    KernelFacts,
    KernelUse,
    backends_in_use,
    judge_use,
    load_kernel_facts,
)
from bwstack.know.rules.predict import ExplainMode, Prediction, Verdict, check_stack, normalize_arch, predict

__all__ = [
    "ARCHES",
    "DATA",
    "FAILURE_CLASSES",
    "KERNEL_FACTS_FILE",
    "KERNEL_FACTS_SCHEMA",
    "KV_LAYOUTS",
    "MATCH_FIELDS",
    "RULES_FILE",
    "RULES_SCHEMA",
    "Condition",
    "Context",
    "ExplainMode",
    "KernelFacts",
    "KernelUse",
    "Matcher",
    "Prediction",
    "ProfileInputs",
    "Rule",
    "RuleBook",
    "Verdict",
    "backends_in_use",
    "canonical",
    "check_stack",
    "config_arch",
    "dsa_default",
    "dsa_kv_layout",
    "is_dsa_model",
    "judge_use",
    "load_kernel_facts",
    "load_rules",
    "normalize_arch",
    "package_versions",
    "parse_rules",
    "predict",
    "profile_inputs",
    "render_rules_text",
    "rules_data",
    "rules_schema",
    "static_effective",
    "version_or_none",
]

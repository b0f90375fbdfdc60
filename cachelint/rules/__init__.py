"""The rule registry: one module per rule, listed here in code order."""

from __future__ import annotations

from cachelint.rules.base import Context, Rule, RuleInfo

__all__ = ["ALL_RULES", "Context", "Rule", "RuleInfo", "rule_by_code"]


def _all_rules() -> tuple[Rule, ...]:
    from cachelint.rules.cl001_worker_only_cache_reset import WorkerOnlyCacheReset
    from cachelint.rules.cl002_version_gated_reset import VersionGatedReset
    from cachelint.rules.cl003_refit_without_encoder_reset import RefitWithoutEncoderReset
    from cachelint.rules.cl004_mm_processor_cache_desync import MmProcessorCacheDesync
    from cachelint.rules.cl005_unawaited_engine_coroutine import UnawaitedEngineCoroutine
    from cachelint.rules.cl006_hasattr_never_true import HasattrNeverTrue
    from cachelint.rules.cl007_prefix_reset_may_noop import PrefixResetMayNoop
    from cachelint.rules.cl008_unknown_worker_rpc import UnknownWorkerRpc
    from cachelint.rules.cl009_removed_engine_argument import RemovedEngineArgument
    from cachelint.rules.cl010_refit_without_cache_reset import RefitWithoutCacheReset
    from cachelint.rules.cl011_string_version_comparison import StringVersionComparison
    from cachelint.rules.cl100_unused_suppression import UnusedSuppression
    from cachelint.rules.cl201_unflushed_weight_update import UnflushedWeightUpdate
    from cachelint.rules.cl202_refit_with_mm_embedding_cache import RefitWithMmEmbeddingCache
    from cachelint.rules.cl203_ignored_flush_result import IgnoredFlushResult
    from cachelint.rules.cl204_sglang_api_out_of_range import SglangApiOutOfRange

    return (
        WorkerOnlyCacheReset(),
        VersionGatedReset(),
        RefitWithoutEncoderReset(),
        MmProcessorCacheDesync(),
        UnawaitedEngineCoroutine(),
        HasattrNeverTrue(),
        PrefixResetMayNoop(),
        UnknownWorkerRpc(),
        RemovedEngineArgument(),
        RefitWithoutCacheReset(),
        StringVersionComparison(),
        UnusedSuppression(),
        UnflushedWeightUpdate(),
        RefitWithMmEmbeddingCache(),
        IgnoredFlushResult(),
        SglangApiOutOfRange(),
    )


ALL_RULES: tuple[Rule, ...] = _all_rules()


def rule_by_code(code: str) -> Rule | None:
    for rule in ALL_RULES:
        if rule.info.code == code.upper() or code in (rule.info.name, *rule.info.former_names):
            return rule
    return None

# CTest include script, read after discovery (tests/CMakeLists.txt). CTest would ignore a name that matches no test,
# so tests/CMakeLists.txt also includes this file at configure time (SPEEDRUN_SLOW_TESTS_CHECK_ONLY set): there every
# name below must be a TEST/TEST_F/TEST_P of tests/, or configuring fails naming it. Seconds: ASan build on 2
# cores, 2026-12-05 (build-asan/Testing/Temporary/CTestCostData.txt; CI's machine is about twice as slow).
#
#   cpu;slow  the `cpu` tests over ~10 s, listed here: CI runs them; `ctest -L cpu -LE slow` is the quick pass.
#   slow      alone: the folders tests/<area>_slow/, whole runs that take many minutes under the sanitizers, too
#             long for CI's 45-minute budget. Not `cpu`; `scripts/test --slow` (ctest --preset slow) runs them.
#             Run them before merging a change to what they cover.
#
# COST makes a fresh build directory (no cost data yet) start the long tests first, so that they do not end up
# alone on one core at the end of the pass.
set(SPEEDRUN_SLOW_TESTS
  ModelGradcheck.EveryParameterMatchesCentralDifferencesInF64        # 54
  TinyWeights.SameSeedSameWeightsDifferentSeedDifferent              # 31
  GptModelQuirks.MtpGradientPastTheBatchEndUsesAllWeights            # 19
  MultiRankRun.TinyAtFourSlicesEqualsOneRankOverTwoAndFourRanks      # 16
  GptModel.TinyLossAtInitialisationIsLogVocabulary                   # 13
  TrainingRun.SameSeedGivesIdenticalLossesAndLossFalls               # 13
  TrainGptCli.FinishedRunFollowsTheContract                          # 10
  NgramModel.TableGradientMatchesFiniteDifferencesThroughTheModel    # 5 (86 on a loaded machine)
  NgramModel.GptTrainableOwnsTheTableAndTheOptimizerNeedsNoGroup     # 8 (130 on a loaded machine)
  TinyExtResume.MidCycleCheckpointContinuesBitExactlyAcrossAnEvent  # 243 (loaded machine)
  CanonicalMask.RegressionCountsAndTierZeroColumns                   # 15
  CanonicalMaskCorpus.ScanFindsAPlantedPair                          # 10
  CanonicalMaskCorpus.DefaultCorpusHasNoMaskedPair                   # 17
  CanonicalMaskCorpus.ProxyCorpusHasNoMaskedPair                     # 37 (skips without data/proxy)
  # 2026-12-08, ASan build on 2 cores: each writes one or two whole tiny exports
  ReferenceExport.CheckpointPairStartsFromTheTrainedWeights          # 138
  ReferenceExport.TinyExportIsCompleteAndMatchesAnIndependentBackward  # 127
  ReferenceExport.PerturbedAdamLearningRateScalesOneGroupsUpdate     # 74
  ReferenceExport.BadStepsAndWindowsAreRejectedNamingTheFlag         # 71
  ReferenceExport.PerturbedAttentionScaleChangesTheResultsAndIsRecorded  # 62
  ReferenceExport.PerturbedBankLearningRateScalesTheBankUpdates      # ≈ 60
  ReferenceExport.PerturbedMuddScaleChangesTheResultsAndIsRecorded   # 57
)
# Tests given a cost and a time limit of their own (label `slow` alone: their folder's).
set(SPEEDRUN_LONG_SLOW_TESTS TinyExtRun.WarmupLeavesNoTraceAndResumeMidCycleIsBitExact)
if(SPEEDRUN_SLOW_TESTS_CHECK_ONLY)
  return()
endif()

foreach(test_name IN LISTS SPEEDRUN_SLOW_TESTS)
  set_tests_properties("${test_name}" PROPERTIES LABELS "cpu;slow" COST 100)
endforeach()

# tests/run_slow: three whole tiny-ext runs (one with the §S.10 warmup) and five reads of 750 MB checkpoints,
# 811 s in CI's ASan build (2026-12-05): a quarter of CI's budget on its own.
set_tests_properties(${SPEEDRUN_LONG_SLOW_TESTS} PROPERTIES COST 1000 TIMEOUT 2400)

# CTest include script: the cpu tests that take over ~10 s in the ASan build get the extra label `slow`
# (`ctest -L cpu -LE slow` for a quick pass; CI runs them all). Listed by the full GoogleTest name; included
# after the discovered tests (tests/CMakeLists.txt), so a name that matches no test is ignored: keep the list
# current when renaming. Seconds: ASan build on 2 cores, 2026-12-05 (build-asan/Testing/Temporary/CTestCostData.txt).
set(SPEEDRUN_SLOW_TESTS
  ModelGradcheck.EveryParameterMatchesCentralDifferencesInF64        # 54
  TinyWeights.SameSeedSameWeightsDifferentSeedDifferent              # 31
  GptModelQuirks.MtpGradientPastTheBatchEndUsesAllWeights            # 19
  MultiRankRun.TinyAtFourSlicesEqualsOneRankOverTwoAndFourRanks      # 16
  GptModel.TinyLossAtInitialisationIsLogVocabulary                   # 13
  TrainingRun.SameSeedGivesIdenticalLossesAndLossFalls               # 13
  TrainGptCli.FinishedRunFollowsTheContract                          # 10
  NgramModel.TableGradientMatchesFiniteDifferencesThroughTheModel    # 86 (loaded machine)
  NgramModel.GptTrainableOwnsTheTableAndTheOptimizerNeedsNoGroup     # 130 (loaded machine)
  TinySeedRun.WarmupLeavesNoTraceAndResumeMidCycleIsBitExact         # ≈ 600 (three tiny-seed runs)
)
foreach(test_name IN LISTS SPEEDRUN_SLOW_TESTS)
  set_tests_properties("${test_name}" PROPERTIES LABELS "cpu;slow")
endforeach()

# Three whole tiny-seed runs under the sanitizers take 15–25 minutes on CI's 2 cores: above the preset's 600 s.
set_tests_properties(TinySeedRun.WarmupLeavesNoTraceAndResumeMidCycleIsBitExact PROPERTIES TIMEOUT 2400)

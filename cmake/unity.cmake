# Unity builds (CMAKE_UNITY_BUILD, set by CI's presets asan and cuda-check): each target's C++ sources are compiled
# in batches of CMAKE_UNITY_BUILD_BATCH_SIZE files, one translation unit per batch, so that the headers every file
# includes (gtest, nlohmann/json, spdlog, toml++, the project's own) are parsed and their templates instantiated and
# compiled once per batch instead of once per file (CUDA sources are compiled one by one as before). Included last
# from the top-level CMakeLists.txt, when every target exists.
#
# A file-local name (anonymous namespace, `static`) is local to its batch, not to its file: two files of one target
# that define the same one cannot share a batch. The files below define such a name that another file of their
# target defines too, so they are compiled alone. A new clash shows as a "redefinition of" error in the unity build:
# rename the helper or list the file here. Builds without CMAKE_UNITY_BUILD (the release presets default, cpu, cuda)
# compile every file alone, so none of this changes what they build.
if(NOT CMAKE_UNITY_BUILD)
  return()
endif()

set(SPEEDRUN_UNITY_ALONE
  # speedrun_kernels
  kernels/anvil.cpp                    # check_stack, second_moment_shape (normuon.cpp)
  kernels/bigram.cpp                   # check_args (column_select.cpp, ngram_embed.cpp)
  kernels/ngram_embed.cpp              # check_args
  kernels/cpu/dc_attention.cpp         # dot_row (cpu/attention.cpp)
  kernels/cpu/fp8.cpp                  # kParallelMin (cpu/activation.cpp)
  kernels/cpu/softcap_loss.cpp         # log_sum_exp, kParallelMinRows (cpu/masked_validation_loss.cpp)
  # speedrun_trainer
  trainer/data/shard.cpp               # Shard::Mapping holds a FileDescriptor of the anonymous namespace: GCC's
                                       # -Wsubobject-linkage, meant for headers, fires for a file included by a batch
  trainer/optim/tail_average.cpp       # as_stack (optim/optimizer.cpp)
  # speedrun_harness
  harness/commands/compare.cpp         # command_template, create_sweep, resume_sweep (commands/record.cpp)
  harness/logparse/logparse.cpp        # is_separator (logparse/experiment.cpp), loss_text (record/harvest.cpp)
  harness/render/history_chart.cpp     # num (report/power_section.cpp, render/svg.cpp)
  harness/report/html_report.cpp       # esc, write_page (report/site.cpp), runs_table (commands/query.cpp)
  harness/render/svg.cpp               # num, open_svg, kPalette (render/html_plots.cpp)
  harness/report/sweep_report.cpp      # opt (record/spool.cpp), step_text (report/comparison_report.cpp)
  # test programs
  tests/attention/rotary_test.cpp      # Tables, make_tables (qk_norm_rotary_test.cpp)
  tests/comm/optimizer_comm_test.cpp   # bitwise_equal (async_collectives_test.cpp), read_file (local_launcher_test.cpp)
  tests/data/synthetic_test.cpp        # U16 (corpus_builder_test.cpp)
  tests/gpu/column_select_cuda_test.cpp          # Case (gemm_gpu_test.cpp), kModelDim (masked_validation_loss_...)
  tests/gpu/dc_attention_cuda_test.cpp           # kLanes (head_gate_cuda_test.cpp)
  tests/gpu/ngram_embed_cuda_test.cpp            # AdamState (adam_cuda_test.cpp), EmbedCase (embedding_cuda_test.cpp)
  tests/gpu/normuon_cuda_test.cpp                # run_apply, ApplyResult, StackShape (anvil_...), kShapes (tail_...)
  tests/harness/command_test.cpp       # error_of (store_test.cpp)
  tests/harness/run_checks_test.cpp    # plan_in (report_test.cpp)
  tests/harness_stats/paired_fixtures_test.cpp  # expect_rel, fixtures, values, kRelTol (the other fixture tests)
  tests/harness_stats/scipy_fixtures_test.cpp   # expect_rel, fixtures, values, kRelTol
  tests/kernels/anvil_test.cpp         # args_at, check_bf16, check_f64, random_stack, to_tensor (normuon_test.cpp)
  tests/kernels/embedding_test.cpp     # ids_tensor (ngram_embed_test.cpp)
  tests/kernels/masked_validation_loss_test.cpp  # i64_tensor (softcap_loss_test.cpp), Case (ngram_embed_test.cpp)
  tests/kernels/smear_bigram_test.cpp  # ids_tensor, scalar (elementwise_test.cpp)
  tests/model/sampled_model_test.cpp   # kBos (model_test.cpp)
  tests/optim/optimizer_test.cpp       # add_to_grad, bitwise_equal, random_values, run_world, Spec (the other files)
  tests/optim/tail_average_test.cpp    # at (value_embeds_cadence_test.cpp), run_world (anvil_optimizer_test.cpp)
  tests/run/checkpoint_test.cpp        # read_bytes
  tests/run/reliability_cli_test.cpp   # read_text (train_gpt_logging_test.cpp)
  tests/run/stop_request_test.cpp      # read_text
)
foreach(file IN LISTS SPEEDRUN_UNITY_ALONE)
  if(NOT EXISTS ${PROJECT_SOURCE_DIR}/${file})
    message(FATAL_ERROR "cmake/unity.cmake lists ${file}, which does not exist (renamed or removed? update the list)")
  endif()
  # Source file properties belong to the directory that adds the file to its target: the first folder of its path.
  string(REGEX MATCH "^[^/]+" folder ${file})
  set_source_files_properties(${PROJECT_SOURCE_DIR}/${file} DIRECTORY ${PROJECT_SOURCE_DIR}/${folder}
                              PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)
endforeach()

# Each corpus replay file renames one fuzz target's entry point with a macro and includes its source: one file per
# translation unit by design.
if(TARGET fuzz_regressions_tests)
  set_property(TARGET fuzz_regressions_tests PROPERTY UNITY_BUILD OFF)
endif()

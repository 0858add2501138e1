# Target `cuda_check` (build preset cuda-check, run by scripts/test where nvcc exists): every target of the build
# with CUDA on except the CPU test programs marked SPEEDRUN_CUDA_INDEPENDENT (tests/CMakeLists.txt): kernels, the
# trainer and harness libraries and programs, benchmarks, GPU tests, and the CPU tests that touch CUDA code paths.
# Included last from the top-level CMakeLists.txt, when every target exists.
function(speedrun_collect_targets dir out_var)
  get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  get_property(subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(sub IN LISTS subdirs)
    speedrun_collect_targets(${sub} sub_targets)
    list(APPEND targets ${sub_targets})
  endforeach()
  set(${out_var} ${targets} PARENT_SCOPE)
endfunction()

if(SPEEDRUN_HAVE_CUDA)
  speedrun_collect_targets(${PROJECT_SOURCE_DIR} all_targets)
  add_custom_target(cuda_check)
  foreach(target IN LISTS all_targets)
    get_target_property(type ${target} TYPE)
    get_target_property(independent ${target} SPEEDRUN_CUDA_INDEPENDENT)
    get_target_property(excluded ${target} EXCLUDE_FROM_ALL)
    if(type STREQUAL "UTILITY" OR independent OR excluded)
      continue()
    endif()
    add_dependencies(cuda_check ${target})
  endforeach()
endif()

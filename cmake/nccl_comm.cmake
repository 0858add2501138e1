# speedrun_comm_nccl: trainer/comm/nccl_comm.cpp, the only file that includes <nccl.h>, and the one target that
# links NCCL (the kernels use none of it). NCCL is found as the toolkit's copy, a Debian package, or NCCL_ROOT (e.g.
# a pip wheel's nvidia/nccl, which ships only libnccl.so.2); both the header and the library must be found, else
# SPEEDRUN_HAVE_NCCL stays undefined and the file compiles to nothing (make_comm then names the missing NCCL).
# Included by trainer/ and, for the GPU-only build, by tests/. The collective watchdog (collective_watchdog.cpp) the
# NCCL communicator runs is compiled here as well, so that this library needs nothing of speedrun_trainer.
if(NOT TARGET speedrun_comm_nccl)
  add_library(speedrun_comm_nccl STATIC ${PROJECT_SOURCE_DIR}/trainer/comm/nccl_comm.cpp
                                        ${PROJECT_SOURCE_DIR}/trainer/comm/collective_watchdog.cpp)
  target_link_libraries(speedrun_comm_nccl PUBLIC speedrun_kernels)
  if(SPEEDRUN_HAVE_CUDA)
    find_path(NCCL_INCLUDE_DIR nccl.h HINTS $ENV{NCCL_ROOT}/include ${CUDAToolkit_INCLUDE_DIRS} /usr/include)
    find_library(NCCL_LIBRARY NAMES nccl libnccl.so.2
                 HINTS $ENV{NCCL_ROOT}/lib ${CUDAToolkit_LIBRARY_DIR} /usr/lib/x86_64-linux-gnu)
    if(NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
      target_include_directories(speedrun_comm_nccl PUBLIC ${NCCL_INCLUDE_DIR})
      target_link_libraries(speedrun_comm_nccl PUBLIC ${NCCL_LIBRARY})
      target_compile_definitions(speedrun_comm_nccl PUBLIC SPEEDRUN_HAVE_NCCL=1)
    endif()
    message(STATUS "speedrun: NCCL header ${NCCL_INCLUDE_DIR}, library ${NCCL_LIBRARY}")
  endif()
endif()

# speedrun_comm_mpi: trainer/comm/mpi_comm.cpp, the only file that includes <mpi.h>. Without MPI (device machines
# that lack it) the same file builds stubs that throw a clear error. Included by trainer/ and, for the GPU-only
# build, by tests/.
if(NOT TARGET speedrun_comm_mpi)
  add_library(speedrun_comm_mpi STATIC ${PROJECT_SOURCE_DIR}/trainer/comm/mpi_comm.cpp
                                       ${PROJECT_SOURCE_DIR}/trainer/comm/rank_order_reduce.cpp)
  target_link_libraries(speedrun_comm_mpi PUBLIC speedrun_kernels)
  if(SPEEDRUN_HAVE_MPI)
    target_link_libraries(speedrun_comm_mpi PRIVATE MPI::MPI_C)
    # The C API only: <mpi.h> would otherwise pull in the deprecated C++ bindings (libmpi_cxx).
    target_compile_definitions(speedrun_comm_mpi PRIVATE SPEEDRUN_HAVE_MPI=1 OMPI_SKIP_MPICXX=1 MPICH_SKIP_MPICXX=1)
  endif()
endif()

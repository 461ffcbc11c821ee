# Sourced by the job scripts: OpenMPI settings for workstations and CI.
# OpenMPI refuses to run as root and to place more ranks than cores unless told.
export OMPI_ALLOW_RUN_AS_ROOT=1
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
# One compute thread per rank unless the caller chose otherwise (vitkd also
# sets this itself from train.threads).
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
# Parallel HDF5 on file systems without locking (NFS, Lustre without flock).
export HDF5_USE_FILE_LOCKING=${HDF5_USE_FILE_LOCKING:-FALSE}
# CTest's job count for the test lanes: twice the cores. Most tests spend about
# half their time starting processes, loading LibTorch or waiting (an MPI
# launch, a checkpoint kill, Slurm's warning), so two slots per core keep
# both cores busy; the tests' MPI ranks yield while they wait
# (OMPI_MCA_mpi_yield_when_idle in tests/CMakeLists.txt). docs/testing.md, "Times".
export VITKD_TEST_JOBS=${VITKD_TEST_JOBS:-$((2 * $(nproc --all)))}

# Spack recipe for vitkd, kept in-tree next to the sources it builds.
#
# Used by the environment in <checkout>/spack.yaml (which registers
# <checkout>/spack/repo and marks vitkd as a develop package with path "."),
# or directly:  spack repo add <checkout>/spack/repo && spack install vitkd@main
"""Spack package for vitkd."""

import glob
import os

from spack.package import *

try:
    # Spack >= 1.0: the build-system base classes live in the builtin package
    # repository (spack_repo.builtin), not in spack.package.
    from spack_repo.builtin.build_systems.cmake import CMakePackage
    from spack_repo.builtin.build_systems.cuda import CudaPackage
except ImportError:
    # Spack 0.x: `from spack.package import *` above already provided them.
    pass


def _checkout_dir():
    """Root of the checkout holding this recipe (<root>/spack/repo/packages/vitkd)."""
    here = os.path.dirname(os.path.abspath(globals().get("__file__", "package.py")))
    return os.path.normpath(os.path.join(here, os.pardir, os.pardir, os.pardir, os.pardir))


class Vitkd(CMakePackage, CudaPackage):
    """vitkd: data-parallel knowledge distillation of Vision Transformers.

    A C++17 MPI application: a teacher ViT is distilled into a smaller student
    with LibTorch, reading its data sets from parallel HDF5, running its data
    augmentation and sharded AdamW on Kokkos host kernels, and configured with
    TOML (toml++). Gradients are reduced with MPI; ``+cuda`` additionally
    builds the NCCL backend (CMake: ``VITKD_WITH_NCCL=ON``) against Spack's
    ``nccl`` and a CUDA build of py-torch.

    LibTorch comes from ``py-torch``: its CMake package is installed inside the
    Python package, at ``<platlib>/torch/share/cmake/Torch``.
    """

    # No public home yet: the recipe fetches from the checkout that holds it.
    # With the environment in spack.yaml nothing is fetched at all (develop).
    homepage = "file://" + _checkout_dir()
    git = "file://" + _checkout_dir()

    version("main", branch="main")

    # Languages (compilers are dependencies since Spack 0.22).
    depends_on("c", type="build")
    depends_on("cxx", type="build")

    depends_on("cmake@3.20:", type="build")

    depends_on("mpi")
    # CMakeLists.txt stops unless HDF5_IS_PARALLEL.
    depends_on("hdf5+mpi")
    # vitkd runs Kokkos on the host (DefaultHostExecutionSpace): the
    # augmentation and AdamW kernels. Spack builds Kokkos Serial unless told
    # otherwise, so ask for OpenMP (train.threads sets its thread count). On
    # GPUs the AdamW update runs as LibTorch kernels on the device
    # (src/optim/adamw.hpp), so +cuda needs no Kokkos CUDA backend. vitkd
    # also builds against a kokkos+cuda+wrapper (its three Kokkos sources go
    # to nvcc_wrapper; AdamW then runs as one Kokkos kernel on the device),
    # but such a Kokkos needs a GPU at start-up even for CPU runs, so this
    # recipe keeps Kokkos on the host (docs/gpu.md).
    depends_on("kokkos+openmp~cuda")
    # LibTorch (TorchConfig.cmake ships in py-torch's site-packages/torch).
    depends_on("py-torch")
    depends_on("tomlplusplus")
    depends_on("cli11@2.1:")          # the command line (src/cmd/args.cpp)
    depends_on("nlohmann-json@3.11:")  # result.json and the other JSON files (src/io/json.cpp)
    depends_on("zlib-api")
    # PNG and JPEG decoding for `vitkd prepare folder`.
    depends_on("libpng")
    depends_on("jpeg")
    # GoogleTest is only needed when the test suite is configured (spack
    # install --test=root sets run_tests, see VITKD_BUILD_TESTS below).
    depends_on("googletest", type="test")
    # The tests run Python scripts (found by CMake's FindPython3) that compare
    # against PyTorch and read HDF5 files; a test whose optional module is
    # missing is skipped, with the reason, rather than failed.
    depends_on("python@3.8:", type="test")
    for _module in ("py-numpy", "py-h5py", "py-matplotlib", "py-pyyaml", "py-pillow"):
        depends_on(_module, type="test")
    depends_on("py-torch", type="test")  # the PyTorch references (also LibTorch, above)

    # ---- +cuda (the variant and cuda_arch come from CudaPackage) -------------
    depends_on("nccl", when="+cuda")
    depends_on("py-torch+cuda", when="+cuda")
    for _arch in CudaPackage.cuda_arch_values:
        depends_on(f"nccl cuda_arch={_arch}", when=f"+cuda cuda_arch={_arch}")
        depends_on(f"py-torch cuda_arch={_arch}", when=f"+cuda cuda_arch={_arch}")
    conflicts(
        "cuda_arch=none",
        when="+cuda",
        msg="vitkd+cuda needs the compute capability of the GPUs, e.g. cuda_arch=90",
    )

    def _torch_cmake_dir(self):
        """Return the directory holding py-torch's TorchConfig.cmake.

        Tried in order, the first holding TorchConfig.cmake wins:

        1. py-torch's ``cmake_prefix_paths`` (recent recipes return
           ``<platlib>/torch/share/cmake``) + ``/Torch``;
        2. ``<py-torch prefix>/<python platlib>/torch/share/cmake/Torch``,
           for recipes without that property;
        3. a glob over ``<py-torch prefix>/lib*/python*/{site,dist}-packages``.
        """
        torch = self.spec["py-torch"]
        candidates = []

        # Any failure here only means "try the next way": the property refers
        # to a module global (python_platlib) that older Spack versions do not
        # set, and older recipes do not define it at all.
        try:
            paths = torch.package.cmake_prefix_paths
        except Exception:
            paths = []
        if isinstance(paths, str):
            paths = [paths]
        candidates.extend(join_path(p, "Torch") for p in paths or [])

        try:
            platlib = self.spec["python"].package.platlib  # relative to a prefix
            candidates.append(join_path(torch.prefix, platlib, "torch", "share", "cmake", "Torch"))
        except Exception:
            pass

        pattern = join_path(
            torch.prefix, "lib*", "python*", "*-packages", "torch", "share", "cmake", "Torch"
        )
        candidates.extend(sorted(glob.glob(pattern)))

        for candidate in candidates:
            if os.path.isfile(join_path(candidate, "TorchConfig.cmake")):
                return candidate
        raise InstallError(
            "vitkd: cannot find TorchConfig.cmake of py-torch (prefix {0}); looked in: {1}".format(
                torch.prefix, ", ".join(candidates) or "(nothing to look in)"
            )
        )

    def cmake_args(self):
        spec = self.spec
        cuda = spec.satisfies("+cuda")
        args = [
            self.define("Torch_DIR", self._torch_cmake_dir()),
            self.define("HDF5_ROOT", spec["hdf5"].prefix),
            self.define("MPI_C_COMPILER", spec["mpi"].mpicc),
            self.define("MPI_CXX_COMPILER", spec["mpi"].mpicxx),
            # A STRING cache entry in CMakeLists.txt (AUTO|ON|OFF): never leave
            # it on AUTO under Spack, so the result does not depend on what
            # happens to be installed on the build machine.
            self.define("VITKD_WITH_NCCL", "ON" if cuda else "OFF"),
            self.define("VITKD_WITH_CUDA", "ON" if cuda else "OFF"),
            self.define("VITKD_BUILD_TESTS", bool(self.run_tests)),
        ]
        if cuda:
            args.extend(
                [
                    self.define("CUDAToolkit_ROOT", spec["cuda"].prefix),
                    self.define("NCCL_ROOT", spec["nccl"].prefix),
                ]
            )
        return args

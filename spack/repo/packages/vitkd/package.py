# Spack recipe for vitkd, kept in-tree next to the sources it builds.
#
# Spack >= 1.0 only (the build-system classes come from the builtin package
# repository, spack_repo.builtin; the tomlplusplus package exists only in
# Spack >= 1.0's builtin packages). Used by the environment in
# <checkout>/spack.yaml (which registers <checkout>/spack/repo and marks vitkd
# as a develop package with path "."), or directly:
#   spack repo add <checkout>/spack/repo && spack install vitkd@main
"""Spack package for vitkd."""

import glob
import os

from spack_repo.builtin.build_systems.cmake import CMakePackage
from spack_repo.builtin.build_systems.cuda import CudaPackage

from spack.package import *


def _checkout_dir():
    """Root of the checkout holding this recipe (<root>/spack/repo/packages/vitkd)."""
    here = os.path.dirname(os.path.abspath(globals().get("__file__", "package.py")))
    return os.path.normpath(os.path.join(here, os.pardir, os.pardir, os.pardir, os.pardir))


# Where a py-torch or LibTorch prefix keeps TorchConfig.cmake, relative to the
# prefix, after the places py-torch's recipe names itself (_torch_cmake_dir).
# Globs; each is listed, as written, in the error when nothing matches.
TORCH_CMAKE_GLOBS = (
    # pip / Spack py-torch: <prefix>/lib/python3.X/site-packages/torch/...;
    # Debian's python3-torch: /usr/lib/python3/dist-packages/torch/...
    "lib*/python*/*-packages/torch/share/cmake/Torch",
    # LibTorch from pytorch.org (the unpacked zip)
    "share/cmake/Torch",
    # LibTorch built with CMake and installed (lib or lib64)
    "lib*/cmake/Torch",
    # Debian's libtorch-dev: /usr/lib/x86_64-linux-gnu/cmake/Torch (any triplet)
    "lib/*-*-*/cmake/Torch",
)


class Vitkd(CMakePackage, CudaPackage):
    """vitkd: data-parallel knowledge distillation of Vision Transformers.

    A C++20 MPI application (Spack >= 1.0; a C++20 compiler): a teacher ViT
    is distilled into a smaller student with LibTorch, reading its data sets
    from parallel HDF5, running its data augmentation and sharded AdamW on
    Kokkos host kernels (a Serial, OpenMP or CUDA Kokkos), and configured
    with TOML (toml++). Gradients are reduced with MPI; ``+cuda``
    additionally builds the NCCL backend (CMake: ``VITKD_WITH_NCCL=ON``)
    against Spack's ``nccl`` and a CUDA build of py-torch.

    LibTorch comes from ``py-torch``, built by Spack or an external: its CMake
    package (TorchConfig.cmake) is found in the Python package
    (``<platlib>/torch/share/cmake/Torch``) or where a LibTorch prefix keeps
    it (``share/cmake/Torch``, ``lib*/cmake/Torch``,
    ``lib/<triplet>/cmake/Torch``: Debian's libtorch-dev).
    """

    # No public home yet: the recipe fetches from the checkout that holds it.
    # With the environment in spack.yaml nothing is fetched at all (develop).
    homepage = "file://" + _checkout_dir()
    git = "file://" + _checkout_dir()

    version("main", branch="main")

    # Languages (compilers are dependencies in Spack >= 1.0).
    depends_on("c", type="build")
    depends_on("cxx", type="build")

    # CMakeLists.txt sets CMAKE_CXX_STANDARD 20 (required): compilers that
    # cannot compile C++20 are refused at concretization, not deep in the build.
    conflicts("%gcc@:9", msg="vitkd is C++20: GCC 10 or newer")
    conflicts("%clang@:9", msg="vitkd is C++20: Clang 10 or newer")
    conflicts("%apple-clang@:11", msg="vitkd is C++20: Apple Clang 12 or newer")
    conflicts("%intel", msg="vitkd is C++20: the classic Intel compiler is not; use %oneapi")

    depends_on("cmake@3.20:", type="build")

    depends_on("mpi")
    # CMakeLists.txt stops unless HDF5_IS_PARALLEL.
    depends_on("hdf5+mpi")
    # Kokkos runs the host kernels (DefaultHostExecutionSpace: augmentation,
    # AdamW); any host backend does: Serial (Debian's, Spack's default) or
    # OpenMP (threads; spack.yaml prefers it). On GPUs AdamW runs as LibTorch
    # kernels unless Kokkos has CUDA, in which case its device kernel is
    # compiled too (src/optim/adamw_kernels.cpp, docs/gpu.md).
    depends_on("kokkos")
    # A CUDA Kokkos initialises CUDA at start-up, so a CPU-only vitkd built
    # against one would need a GPU to run at all.
    conflicts(
        "^kokkos+cuda",
        when="~cuda",
        msg="a CUDA Kokkos needs vitkd+cuda (it initialises CUDA at start-up); "
        "for a CPU build use a Serial or OpenMP Kokkos",
    )
    # vitkd_kokkos's sources go to Kokkos's compiler (kokkos_compilation in
    # CMakeLists.txt) with C++20 and device lambdas (KOKKOS_LAMBDA): the same
    # standard for Kokkos itself, lambdas on. A Kokkos compiled as a CMake
    # CUDA language (+cmake_lang) has no such compiler launcher.
    requires(
        "^kokkos cxxstd=20 +cuda_lambda",
        when="^kokkos+cuda",
        msg="a CUDA Kokkos compiles vitkd's device lambdas at C++20: kokkos cxxstd=20 +cuda_lambda",
    )
    conflicts(
        "^kokkos+cuda+cmake_lang",
        msg="vitkd sends its Kokkos sources to Kokkos's compiler (kokkos_compilation); "
        "use a CUDA Kokkos built with +wrapper (or %clang), not +cmake_lang",
    )
    # LibTorch (TorchConfig.cmake: see TORCH_CMAKE_GLOBS and _torch_cmake_dir).
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
        # A CUDA Kokkos compiles AdamW's kernel for the same GPUs.
        requires(f"^kokkos cuda_arch={_arch}", when=f"+cuda cuda_arch={_arch} ^kokkos+cuda")
    conflicts(
        "cuda_arch=none",
        when="+cuda",
        msg="vitkd+cuda needs the compute capability of the GPUs, e.g. cuda_arch=90",
    )

    def _torch_cmake_dir(self):
        """Return the directory holding py-torch's (or LibTorch's) TorchConfig.cmake.

        Looked in, in order; the first holding TorchConfig.cmake wins:

        1. py-torch's ``cmake_prefix_paths`` (recent recipes return
           ``<platlib>/torch/share/cmake``) + ``/Torch``;
        2. ``<prefix>/<python platlib>/torch/share/cmake/Torch``;
        3. ``<prefix>/<glob>`` for each glob of TORCH_CMAKE_GLOBS.

        Nothing found: one InstallError listing every place looked in.
        """
        torch = self.spec["py-torch"]
        prefix = str(torch.prefix)
        looked = []  # every place, once, in order (globs without a match as written)

        def look(path):
            if path not in looked:
                looked.append(path)
            return os.path.isfile(os.path.join(path, "TorchConfig.cmake"))

        # Any failure here only means "try the next way": the property refers
        # to a module global (python_platlib) that is only set during a build,
        # and older recipes do not define it at all.
        try:
            paths = torch.package.cmake_prefix_paths
        except Exception:
            paths = []
        if isinstance(paths, str):
            paths = [paths]
        for p in paths or []:
            if look(join_path(str(p), "Torch")):
                return join_path(str(p), "Torch")

        try:
            platlib = self.spec["python"].package.platlib  # relative to a prefix
            candidate = join_path(prefix, platlib, "torch", "share", "cmake", "Torch")
            if look(candidate):
                return candidate
        except Exception:
            pass

        for pattern in TORCH_CMAKE_GLOBS:
            matches = sorted(glob.glob(join_path(prefix, pattern)))
            for candidate in matches:
                if look(candidate):
                    return candidate
            if not matches:
                looked.append(join_path(prefix, pattern))

        raise InstallError(
            "vitkd: no TorchConfig.cmake for py-torch (prefix {0}); looked in: {1}. "
            "An external py-torch or LibTorch must be the prefix that holds one of these".format(
                prefix, "; ".join(looked)
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

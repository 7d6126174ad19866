"""Turns every tests/**/*_test.cc into a cc_test; used by //tests:BUILD.

  tg_test_suite(overrides = {})

- Each `tests/<path>/<stem>_test.cc` becomes `//tests:<path>/<stem>_test`
  (a file directly in tests/ is just `//tests:<stem>_test`), so adding a test is
  adding a file; no BUILD edits. Do not put BUILD files in tests/ subfolders
  (a subpackage hides its files from this glob).
- Every test links //:tapegrad, GoogleTest (+ gtest_main) and `:test_util`: the
  helper headers tests/**/*.h and helper sources tests/*.c, tests/*.cc that are
  not tests (e.g. tests/test_util.h, tests/test_util.cc).
- data: tests/**/fixtures/** (the test runs in the workspace root of its
  runfiles, so it opens "tests/fixtures/x.bin").
- Tests under tests/cuda/ get the tag "cuda" (filter: --test_tag_filters=-cuda)
  and, when CUDA is built, the toolkit headers (#include <cuda_runtime.h>; guard
  it with #ifdef TG_WITH_CUDA, as cpu_only builds have no toolkit headers).
- Like //:tapegrad, tests see TG_WITH_CUDA (and TG_CUDA_ARCHS/VERSION) when the
  CUDA backend is built.
- `overrides` maps a test name to extra cc_test attributes, e.g.
  {"nn/mnist_train_test": {"size": "large"}}; "extra_deps" adds libraries
  (tests/cuda/nccl_test links //distributed:nccl_api).
"""

load(
    "//third_party/cuda:cuda.bzl",
    "TG_CUDA_TOOLCHAINS",
    "if_cuda",
    "tg_cuda_defines",
)

def tg_test_suite(overrides = {}):
    native.cc_library(
        name = "test_util",
        testonly = True,
        hdrs = native.glob(["**/*.h"], exclude = ["**/fixtures/**"], allow_empty = True),
        srcs = native.glob(
            ["*.c", "*.cc"],
            exclude = ["*_test.cc", "*_fuzz.cc", "*_fuzzer.cc"],
            allow_empty = True,
        ),
        # Both #include "tests/test_util.h" and #include "test_util.h" work.
        includes = ["."],
        # test_util.cc's static initializer sets the error mode (silent) of every test.
        alwayslink = True,
        deps = [
            "//:tapegrad",
            "@googletest//:gtest",
        ],
    )

    data = native.glob(["**/fixtures/**"], allow_empty = True)
    names = []
    for src in native.glob(["**/*_test.cc"], exclude = ["**/fixtures/**"], allow_empty = True):
        name = src[:-len(".cc")]
        names.append(name)
        is_cuda = src.startswith("cuda/")
        attrs = {
            "size": "medium",
            "tags": ["cuda"] if is_cuda else [],
        }
        attrs.update(overrides.get(name, {}))
        extra_deps = attrs.pop("extra_deps", [])
        native.cc_test(
            name = name,
            srcs = [src],
            data = data,
            deps = [
                ":test_util",
                "//:tapegrad",
                "@googletest//:gtest_main",
            ] + extra_deps + (if_cuda(["@local_cuda//:cuda_headers"]) if is_cuda else []),
            local_defines = tg_cuda_defines(),
            toolchains = TG_CUDA_TOOLCHAINS,
            # Static: //:tapegrad's weak-symbol backend lookup needs every object
            # in one image, and static test binaries start faster.
            linkstatic = True,
            **attrs
        )
    for name in overrides:
        if name not in names:
            fail("tests/BUILD: override for '%s', but there is no tests/%s.cc" % (name, name))

def tg_mpi_test(name, srcs, ranks = 2, size = "medium", **kwargs):
    """A GoogleTest binary run on `ranks` ranks under mpirun (tests/distributed/run_mpi.sh).

    `name` is the sh_test; `name + "_bin"` the binary (tests/distributed/mpi_main.cc is its
    main: rank 0 writes the XML report, so .ci/run counts the cases). Links //distributed:dist.
    """
    native.cc_binary(
        name = name + "_bin",
        testonly = True,
        srcs = srcs + ["distributed/mpi_main.cc"],
        deps = [
            ":test_util",
            "//:tapegrad",
            "//distributed:dist",
            "@googletest//:gtest",
        ],
        linkstatic = True,
    )
    native.sh_test(
        name = name,
        size = size,
        srcs = ["distributed/run_mpi.sh"],
        args = [str(ranks), "$(rootpath :%s_bin)" % name],
        data = [":%s_bin" % name, "distributed/lsan_openmpi.supp"] + native.glob(["**/fixtures/**"], allow_empty = True),
        **kwargs
    )

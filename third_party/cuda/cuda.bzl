"""CUDA build macros for tapegrad.

  tg_cuda_library(name, srcs, hdrs, deps, copts)
      Compiles each .cu in `srcs` with nvcc into an object file and wraps the
      objects in a cc_library `name` (alwayslink, linked statically) that also
      links cudart, cuBLAS and cuRAND with an rpath to the toolkit. `hdrs` (and
      the headers of `deps`) are the inputs nvcc may #include, root-relative
      (`#include "core/tensor.h"`), since nvcc runs with -I. at the execroot.

  if_cuda(if_true, if_false = [])
      A select() that gives `if_true` when the CUDA backend is built.

  tg_cuda_defines()
      if_cuda() of the local_defines the C code uses to report build info:
      TG_WITH_CUDA, TG_CUDA_ARCHS="sm_80,sm_90", TG_CUDA_VERSION="13.0".
      The target must list TG_CUDA_TOOLCHAINS in `toolchains`.

Modes (see //.bazelrc):
  default                         CUDA if a toolkit was found, else CPU only.
  --config=cpu_only               (--define=tg_cuda=off) no CUDA even if found.
  --config=cuda                   (--define=tg_cuda=on) CUDA; fails at analysis
                                  with a clear message if no toolkit was found.
  --define=tg_cuda_archs=sm_90    architectures to build (comma separated);
                                  default TG_CUDA_DEFAULT_ARCHS. Each gets SASS;
                                  the newest also gets PTX for forward compat.
"""

load(
    "@local_cuda//:defs.bzl",
    "CUDA_FOUND",
    "CUDA_INCLUDE_DIR",
    "CUDA_NVCC",
    "CUDA_SEARCHED",
    "CUDA_VERSION",
)

TG_CUDA_DEFAULT_ARCHS = "sm_80,sm_90"

_CUDA_OFF = "//third_party/cuda:cuda_off"
_CUDA_ON = "//third_party/cuda:cuda_on"

# Targets whose local_defines use tg_cuda_defines() list this in `toolchains`.
TG_CUDA_TOOLCHAINS = ["//third_party/cuda:cuda_make_variables"]

def if_cuda(if_true, if_false = []):
    """select(): if_true when the CUDA backend is built (found and not off, or forced on)."""
    if CUDA_FOUND:
        return select({
            _CUDA_OFF: if_false,
            "//conditions:default": if_true,
        })
    return select({
        _CUDA_ON: if_true,  # the CUDA library then fails analysis with a clear message
        "//conditions:default": if_false,
    })

def tg_cuda_defines():
    return if_cuda([
        "TG_WITH_CUDA",
        "TG_CUDA_ARCHS=\\\"$(TG_CUDA_ARCHS)\\\"",
        "TG_CUDA_VERSION=\\\"$(TG_CUDA_VERSION)\\\"",
    ])

def _arch_list(ctx):
    """The requested architectures as numbers-with-suffix: ["80", "90a"]."""
    text = ctx.var.get("tg_cuda_archs", TG_CUDA_DEFAULT_ARCHS)
    archs = []
    for word in text.replace(";", ",").replace(" ", ",").split(","):
        word = word.strip()
        if not word:
            continue
        given = word
        for prefix in ["sm_", "compute_"]:
            if word.startswith(prefix):
                word = word[len(prefix):]
        digits = word.rstrip("af")  # sm_90a, sm_100f: arch- and family-specific
        if not digits.isdigit() or len(word) - len(digits) > 1:
            fail("--define=tg_cuda_archs=%s: '%s' is not an architecture like sm_90" % (text, given))
        if word not in archs:
            archs.append(word)
    if not archs:
        fail("--define=tg_cuda_archs is empty; give e.g. sm_80,sm_90")
    return archs

def _arch_number(arch):
    return int(arch.rstrip("af"))

def _gencode_flags(archs):
    flags = ["-gencode=arch=compute_%s,code=sm_%s" % (a, a) for a in archs]
    newest = archs[0]
    for a in archs:
        if _arch_number(a) > _arch_number(newest):
            newest = a
    flags.append("-gencode=arch=compute_%s,code=compute_%s" % (newest, newest))
    return flags

def _cuda_make_variables_impl(ctx):
    archs = _arch_list(ctx)
    return [platform_common.TemplateVariableInfo({
        "TG_CUDA_ARCHS": ",".join(["sm_" + a for a in archs]),
        "TG_CUDA_VERSION": CUDA_VERSION,
    })]

cuda_make_variables = rule(
    implementation = _cuda_make_variables_impl,
    doc = "Make variables $(TG_CUDA_ARCHS) and $(TG_CUDA_VERSION) for `toolchains`.",
)

def _cuda_toolkit_required_impl(ctx):
    fail("\n\n  --config=cuda (--define=tg_cuda=on) asks for the CUDA backend, but no CUDA\n" +
         "  toolkit was found (searched: %s).\n" % CUDA_SEARCHED +
         "  Install it, or point CUDA_PATH at it and run `bazel sync --configure`,\n" +
         "  or build without CUDA: --config=cpu_only.\n")

cuda_toolkit_required = rule(
    implementation = _cuda_toolkit_required_impl,
    doc = "Fails analysis: CUDA was demanded but not found.",
)

def _nvcc_objects_impl(ctx):
    archs = _arch_list(ctx)
    headers = [f for f in ctx.files.hdrs]
    include_flags = ["-I."]
    if ctx.label.workspace_root:
        include_flags.append("-I" + ctx.label.workspace_root)
    include_flags.append("-I" + ctx.bin_dir.path)
    transitive_headers = []
    for dep in ctx.attr.deps:
        if CcInfo in dep:
            cc = dep[CcInfo].compilation_context
            transitive_headers.append(cc.headers)
            for directory in cc.includes.to_list() + cc.quote_includes.to_list() + cc.system_includes.to_list():
                include_flags.append("-I" + directory)
            for define in cc.defines.to_list():
                include_flags.append("-D" + define)
    inputs = depset(headers, transitive = transitive_headers)

    outputs = []
    for src in ctx.files.srcs:
        stem = src.short_path[:-len(".cu")] if src.short_path.endswith(".cu") else src.short_path
        if stem.startswith("../"):  # a source from an external repository
            stem = stem[3:]
        # One -fPIC object serves both PIC and non-PIC links (Bazel uses a
        # plain .o for either; giving .o and .pic.o links both: duplicates).
        object = ctx.actions.declare_file("_objs/%s/%s.o" % (ctx.label.name, stem))
        args = ctx.actions.args()
        args.add_all(["-c", "-O3", "-std=c++17", "-Xcompiler", "-fPIC", "-DTG_WITH_CUDA"])
        args.add_all(include_flags)
        args.add("-I" + CUDA_INCLUDE_DIR)
        args.add_all(_gencode_flags(archs))
        args.add_all(ctx.attr.copts)
        args.add("-o", object)
        args.add(src)
        ctx.actions.run(
            executable = CUDA_NVCC,
            arguments = [args],
            inputs = depset([src], transitive = [inputs]),
            outputs = [object],
            mnemonic = "Nvcc",
            progress_message = "nvcc %s (%s)" % (src.short_path, ",".join(["sm_" + a for a in archs])),
            use_default_shell_env = True,  # nvcc finds the host gcc on PATH
        )
        outputs.append(object)
    return [DefaultInfo(files = depset(outputs))]

nvcc_objects = rule(
    implementation = _nvcc_objects_impl,
    attrs = {
        "srcs": attr.label_list(allow_files = [".cu"]),
        "hdrs": attr.label_list(allow_files = True),
        "deps": attr.label_list(),
        "copts": attr.string_list(),
    },
    doc = "Compiles each .cu file with nvcc into a -fPIC .o object.",
)

def tg_cuda_library(name, srcs, hdrs = [], deps = [], copts = [], visibility = None, **kwargs):
    """cc_library `name` holding the nvcc-compiled `srcs`; empty when CUDA is off."""
    if CUDA_FOUND and srcs:
        nvcc_objects(
            name = name + "_nvcc",
            srcs = srcs,
            hdrs = hdrs,
            deps = deps,
            copts = copts,
            tags = ["manual"],  # built only when :name is, i.e. not under cpu_only
            visibility = ["//visibility:private"],
        )
        native.cc_library(
            name = name,
            srcs = select({
                _CUDA_OFF: [],
                "//conditions:default": [":" + name + "_nvcc"],
            }),
            deps = select({
                _CUDA_OFF: [],
                "//conditions:default": deps + ["@local_cuda//:cuda"],
            }),
            alwayslink = True,
            linkstatic = True,
            visibility = visibility,
            **kwargs
        )
    elif CUDA_FOUND:  # no .cu files (yet): just the CUDA libraries
        native.cc_library(
            name = name,
            deps = select({
                _CUDA_OFF: [],
                "//conditions:default": deps + ["@local_cuda//:cuda"],
            }),
            linkstatic = True,
            visibility = visibility,
            **kwargs
        )
    else:
        native.cc_library(
            name = name,
            deps = select({
                _CUDA_ON: ["//third_party/cuda:cuda_toolkit_required"],
                "//conditions:default": [],
            }),
            visibility = visibility,
            **kwargs
        )

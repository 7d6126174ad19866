"""Stand-in for @rules_cc//cc:defs.bzl: thin wrappers over Bazel's native rules.

Debian's bazel-rules-cc loads `use_cpp_toolchain`, which Bazel 4.2.3 lacks, so
this repository re-exports the built-in rules under the same names instead.
"""

def cc_library(**attrs):
    native.cc_library(**attrs)

def cc_binary(**attrs):
    native.cc_binary(**attrs)

def cc_test(**attrs):
    native.cc_test(**attrs)

def cc_import(**attrs):
    native.cc_import(**attrs)

def cc_proto_library(**attrs):
    native.cc_proto_library(**attrs)

def cc_toolchain(**attrs):
    native.cc_toolchain(**attrs)

def cc_toolchain_suite(**attrs):
    native.cc_toolchain_suite(**attrs)

def objc_library(**attrs):
    native.objc_library(**attrs)

def objc_import(**attrs):
    native.objc_import(**attrs)

// The torch headers that most of the ops' C++ files include, for the build to parse once rather
// than once a file: setup.py precompiles this file (GCC) when a build compiles enough C++ files to
// pay for it (_build_config.py: TORCH_HEADERS) and hands it to each of them first, with -include.
// Nothing needs to include it: every file includes what it uses, and builds the same without it.
// Add a header here when many ops' C++ files include it: one that few include makes every file
// load a larger precompiled header (the autograd headers, which only the norm, linear and MLP
// bindings include, cost the other files about what they saved those).
#include <ATen/AccumulateType.h>
#include <ATen/Dispatch.h>
#include <ATen/ExpandUtils.h>  // through opgen/broadcast.h: the elementwise ops' CPU files
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/zeros_like.h>
#include <torch/library.h>

// Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
// Python binding of the "optcast" backend; optcast_torch/__init__.py registers it with
// torch.distributed.

#include <pybind11/chrono.h>
#include <torch/python.h>

#include "process_group.h"

namespace py = pybind11;
using optcast::torch_backend::ProcessGroupOptcast;

PYBIND11_MODULE(_optcast_torch, m) {
  m.doc() = "torch.distributed backend that reduces CPU tensors on Optcast reduction servers";
  // torch._C registered c10d::ProcessGroup and c10d::Store; this class derives from the former.
  py::class_<ProcessGroupOptcast, c10d::ProcessGroup, c10::intrusive_ptr<ProcessGroupOptcast>>(m, "ProcessGroupOptcast")
      .def(py::init<const c10::intrusive_ptr<c10d::Store>&, int, int, std::chrono::milliseconds,
                    c10::intrusive_ptr<c10d::ProcessGroup>>(),
           py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"), py::arg("gloo") = nullptr,
           py::call_guard<py::gil_scoped_release>())
      .def("set_wire_dtype", &ProcessGroupOptcast::setWireDtype, py::arg("name"),
           "float32 on a 16-bit wire for this group's later collectives: 'bf16', 'fp16' or 'off' (every rank "
           "the same). OPTCAST_WIRE_DTYPE sets it for every group.",
           py::call_guard<py::gil_scoped_release>());
}

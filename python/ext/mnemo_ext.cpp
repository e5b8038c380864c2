// mnemo._mnemo_ext: the compiled half of the Python package. It makes the
// calls on the hot path of a search (mnemo_store_search and
// mnemo_store_search_device) straight from C++, compiled against mnemo.h, so
// the compiler checks every signature; the rest of the package calls the
// library through ctypes (python/mnemo/_cdefs.py).
//
// Everything here runs with the GIL held except the library call itself. A
// failed call's mnemo_last_error() text is read right after it, on the same
// thread, before the GIL is taken back.
#include <nanobind/nanobind.h>
#include <nanobind/stl/vector.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "mnemo.h"

namespace nb = nanobind;

namespace {

// What the Python side hands over once (configure()); strong references kept
// for the life of the process.
struct Hooks {
  PyObject* make_error = nullptr;     // (kind, status, message) -> exception instance
  PyObject* empty = nullptr;          // numpy.empty
  PyObject* aligned_empty = nullptr;  // mnemo.arrays.aligned_empty
  PyObject* ndarray = nullptr;        // numpy.ndarray
  PyObject* dtype_u64 = nullptr;      // numpy.dtype("uint64")
  PyObject* dtype_f32 = nullptr;      // numpy.dtype("float32")
};
Hooks hooks;

// The exception class raised: MnemoError for a failed library call, else the
// package's MnemoTypeError / MnemoValueError for a refused argument.
enum ErrorKind : int { kLibrary = 0, kType = 1, kValue = 2 };

// A refused argument, described before anything is called or written.
struct Problem {
  int kind = kValue;
  mnemo_status status = MNEMO_OK;
  std::string message;
  explicit operator bool() const { return status != MNEMO_OK; }
};

[[noreturn]] void raise_error(int kind, mnemo_status status, const std::string& message) {
  if (hooks.make_error == nullptr) throw std::runtime_error(message);
  nb::object text = nb::steal(PyUnicode_DecodeUTF8(message.data(), (Py_ssize_t)message.size(), "replace"));
  if (!text.is_valid()) throw nb::python_error();
  nb::object exc = nb::steal(PyObject_CallFunction(hooks.make_error, "iiO", kind, (int)status, text.ptr()));
  if (!exc.is_valid()) throw nb::python_error();
  PyErr_SetObject((PyObject*)Py_TYPE(exc.ptr()), exc.ptr());
  throw nb::python_error();
}

[[noreturn]] void raise_problem(const Problem& p) { raise_error(p.kind, p.status, p.message); }

// A failed library call: its status and the thread's last error text.
struct CallResult {
  mnemo_status status = MNEMO_OK;
  std::string error;
};

void check(const CallResult& r) {
  if (r.status != MNEMO_OK) raise_error(kLibrary, r.status, r.error);
}

// Reads the error text on the calling thread, right after the call.
void note_error(CallResult& r) {
  if (r.status == MNEMO_OK) return;
  const char* text = mnemo_last_error();
  r.error = text ? text : "";
}

alignas(MNEMO_ALIGNMENT) unsigned char empty_data[MNEMO_ALIGNMENT];

// A buffer-protocol view of a host array, released on destruction.
class HostArray {
 public:
  HostArray() { std::memset(&view_, 0, sizeof view_); }
  ~HostArray() {
    if (held_) PyBuffer_Release(&view_);
  }
  HostArray(const HostArray&) = delete;
  HostArray& operator=(const HostArray&) = delete;

  bool acquire(PyObject* obj) {
    if (PyObject_GetBuffer(obj, &view_, PyBUF_RECORDS_RO) != 0) {
      PyErr_Clear();
      return false;
    }
    held_ = true;
    return true;
  }
  const Py_buffer& view() const { return view_; }
  uint64_t size() const {
    uint64_t n = 1;
    for (int i = 0; i < view_.ndim; ++i) n *= (uint64_t)view_.shape[i];
    return n;
  }
  // The pointer to pass: a fixed aligned one for an empty array, which is
  // neither read nor written.
  void* data() const { return size() == 0 ? empty_data : view_.buf; }

 private:
  Py_buffer view_;
  bool held_ = false;
};

// The one-letter struct code of a native little-endian format, or 0.
char format_code(const Py_buffer& v) {
  const char* f = v.format ? v.format : "B";
  if (*f == '@' || *f == '=' || *f == '<') ++f;
  if (f[0] == 0 || f[1] != 0) return 0;
  return f[0];
}

bool is_f32(const Py_buffer& v) { return format_code(v) == 'f' && v.itemsize == 4; }
bool is_u64(const Py_buffer& v) {
  char c = format_code(v);
  return (c == 'L' || c == 'Q') && v.itemsize == 8;
}

std::string type_name(PyObject* obj) { return Py_TYPE(obj)->tp_name; }

std::string dtype_name(PyObject* obj, const Py_buffer* v) {
  PyObject* dt = PyObject_GetAttrString(obj, "dtype");
  if (dt != nullptr) {
    PyObject* s = PyObject_Str(dt);
    Py_DECREF(dt);
    if (s != nullptr) {
      const char* c = PyUnicode_AsUTF8(s);
      std::string out = c ? c : "?";
      Py_DECREF(s);
      return out;
    }
  }
  PyErr_Clear();
  return std::string("format '") + (v && v->format ? v->format : "B") + "'";
}

std::string hex(const void* p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%#llx", (unsigned long long)(uintptr_t)p);
  return buf;
}

std::string shape_text(const Py_buffer& v) {
  std::string s = "(";
  for (int i = 0; i < v.ndim; ++i) s += (i ? ", " : "") + std::to_string(v.shape[i]);
  return s + (v.ndim == 1 ? ",)" : ")");
}

std::string shape_text(int ndim, uint64_t rows, uint64_t k) {
  return ndim == 1 ? "(" + std::to_string(k) + ",)" : "(" + std::to_string(rows) + ", " + std::to_string(k) + ")";
}

Problem problem(int kind, mnemo_status status, std::string message) {
  Problem p;
  p.kind = kind;
  p.status = status;
  p.message = std::move(message);
  return p;
}

// Checks a host array argument: buffer, dtype, C order, alignment (and
// writability for outputs). Fills `a`; returns the problem, if any.
Problem check_array(PyObject* obj, const char* name, bool f32, bool writable, HostArray& a) {
  if (!a.acquire(obj))
    return problem(kType, MNEMO_E_DTYPE, std::string(name) + " must be a numpy.ndarray, not " + type_name(obj));
  const Py_buffer& v = a.view();
  if (f32 ? !is_f32(v) : !is_u64(v))
    return problem(
        kType, MNEMO_E_DTYPE,
        std::string(name) + " has dtype " + dtype_name(obj, &v) + "; expected " + (f32 ? "float32" : "uint64"));
  if (!PyBuffer_IsContiguous(&v, 'C'))
    return problem(kValue, MNEMO_E_INVALID_ARGUMENT, std::string(name) + " is not C-contiguous");
  if (a.size() != 0 && (uintptr_t)v.buf % MNEMO_ALIGNMENT != 0)
    return problem(
        kValue, MNEMO_E_MISALIGNED,
        std::string(name) + " data at " + hex(v.buf) + " is not " + std::to_string(MNEMO_ALIGNMENT) + "-byte aligned");
  if (writable && v.readonly) return problem(kValue, MNEMO_E_INVALID_ARGUMENT, std::string(name) + " is read-only");
  return Problem();
}

Problem check_out_shape(const HostArray& a, const char* name, int ndim, uint64_t rows, uint64_t k) {
  const Py_buffer& v = a.view();
  bool same = v.ndim == ndim &&
              (ndim == 1 ? (uint64_t)v.shape[0] == k : (uint64_t)v.shape[0] == rows && (uint64_t)v.shape[1] == k);
  if (same) return Problem();
  return problem(kValue, MNEMO_E_SHAPE,
                 std::string(name) + " has shape " + shape_text(v) + "; expected " + shape_text(ndim, rows, k));
}

// A new C-contiguous, aligned numpy array for results (numpy.empty, whose
// memory comes from malloc and is aligned in practice; aligned_empty when
// it is not). Returns nullptr with a Python error set on failure.
PyObject* new_output(int ndim, uint64_t rows, uint64_t k, PyObject* dtype, void** data) {
  PyObject* shape = ndim == 1 ? Py_BuildValue("(K)", (unsigned long long)k)
                              : Py_BuildValue("(KK)", (unsigned long long)rows, (unsigned long long)k);
  if (shape == nullptr) return nullptr;
  PyObject* args[2] = {shape, dtype};
  PyObject* out = PyObject_Vectorcall(hooks.empty, args, 2, nullptr);
  for (int attempt = 0; out != nullptr && attempt < 2; ++attempt) {
    Py_buffer v;
    if (PyObject_GetBuffer(out, &v, PyBUF_WRITABLE) != 0) {
      Py_CLEAR(out);
      break;
    }
    void* p = v.buf;
    bool empty = v.len == 0;
    PyBuffer_Release(&v);
    if (empty || (uintptr_t)p % MNEMO_ALIGNMENT == 0) {
      *data = empty ? empty_data : p;
      Py_DECREF(shape);
      return out;
    }
    Py_DECREF(out);
    out = attempt == 0 ? PyObject_Vectorcall(hooks.aligned_empty, args, 2, nullptr) : nullptr;
  }
  Py_DECREF(shape);
  if (out == nullptr && !PyErr_Occurred()) PyErr_SetString(PyExc_MemoryError, "cannot allocate aligned search results");
  return nullptr;
}

// A ctypes structure's buffer held for the length of a call.
class OptionsView {
 public:
  explicit OptionsView(nb::handle opts) {
    std::memset(&view_, 0, sizeof view_);
    if (opts.is_none()) return;
    if (PyObject_GetBuffer(opts.ptr(), &view_, PyBUF_SIMPLE) != 0) {
      PyErr_Clear();
      raise_error(kType, MNEMO_E_DTYPE,
                  std::string("search options must be a mnemo_search_options structure, not ") + type_name(opts.ptr()));
    }
    held_ = true;
    if ((size_t)view_.len != sizeof(mnemo_search_options))
      raise_error(kValue, MNEMO_E_INVALID_ARGUMENT,
                  "search options hold " + std::to_string(view_.len) + " bytes; mnemo.h's mnemo_search_options has " +
                      std::to_string(sizeof(mnemo_search_options)));
  }
  ~OptionsView() {
    if (held_) PyBuffer_Release(&view_);
  }
  OptionsView(const OptionsView&) = delete;
  OptionsView& operator=(const OptionsView&) = delete;
  const mnemo_search_options* get() const {
    return held_ ? static_cast<const mnemo_search_options*>(view_.buf) : nullptr;
  }
  // The options to pass with `nprobe` applied: nprobe = 0 keeps the given
  // options (or NULL, the defaults) as they are; else a copy of them (or of
  // the defaults) whose nprobe is `nprobe`.
  const mnemo_search_options* with_nprobe(uint32_t nprobe) {
    if (nprobe == 0) return get();
    probed_ = held_ ? *get() : mnemo_search_options_default();
    probed_.nprobe = nprobe;
    return &probed_;
  }

 private:
  Py_buffer view_;
  bool held_ = false;
  mnemo_search_options probed_{};
};

const mnemo_store* store_of(uintptr_t handle) { return reinterpret_cast<const mnemo_store*>(handle); }

// Store.search on host arrays.
//   queries: float32 [nq, dim] or [dim], C-contiguous, 16-byte aligned.
//   k: a Python int >= 0 (the library refuses 0).
//   opts: a ctypes mnemo_search_options, or None for the defaults. Its
//     pointers (filter ids or bitmap, where, where_each) are passed as they
//     are: the caller keeps what they point to alive through the call.
//   out_ids / out_scores: uint64 / float32 arrays of the result shape, or
//     None for new numpy arrays.
//   strict: False returns None, having called nothing, when an argument is
//     not usable as it is (the caller then converts it, or raises its own
//     error); True raises MnemoTypeError / MnemoValueError instead.
//   nprobe: lists of the store's index to read (mnemo_search_options.nprobe);
//     0 leaves opts' own nprobe (0 with opts None: the exact scan).
// Returns (ids, scores); a failed call raises MnemoError with the library's
// status and message, and the outputs are left as they were.
nb::object search_host(uintptr_t store, nb::handle queries, nb::handle k_obj, nb::handle opts, uint64_t dim,
                       nb::handle out_ids, nb::handle out_scores, bool strict, uint32_t nprobe) {
  if (!strict) {
    // The fast path takes exact numpy arrays and a plain int k only.
    if (Py_TYPE(queries.ptr()) != (PyTypeObject*)hooks.ndarray) return nb::none();
    if (!out_ids.is_none() && Py_TYPE(out_ids.ptr()) != (PyTypeObject*)hooks.ndarray) return nb::none();
    if (!out_scores.is_none() && Py_TYPE(out_scores.ptr()) != (PyTypeObject*)hooks.ndarray) return nb::none();
  }
  if (!PyLong_CheckExact(k_obj.ptr())) {
    if (!strict) return nb::none();
    raise_error(kType, MNEMO_E_DTYPE, std::string("k must be an int, not ") + type_name(k_obj.ptr()));
  }
  unsigned long long k = PyLong_AsUnsignedLongLong(k_obj.ptr());
  if (k == (unsigned long long)-1 && PyErr_Occurred()) {
    PyErr_Clear();
    if (!strict) return nb::none();
    raise_error(kValue, MNEMO_E_OUT_OF_RANGE, "k is not a uint64");
  }

  HostArray q;
  Problem p = check_array(queries.ptr(), "queries", true, false, q);
  if (!p && q.view().ndim != 1 && q.view().ndim != 2)
    p = problem(kValue, MNEMO_E_SHAPE,
                "queries has " + std::to_string(q.view().ndim) + " dimensions (shape " + shape_text(q.view()) +
                    "); expected 1 or 2");
  int ndim = q.view().ndim;
  uint64_t nq = ndim == 2 ? (uint64_t)q.view().shape[0] : 1;
  uint64_t qdim = p ? 0 : (uint64_t)q.view().shape[ndim - 1];
  if (!p && qdim != dim)
    p = problem(kValue, MNEMO_E_SHAPE,
                "queries have dimension " + std::to_string(qdim) + "; the store has " + std::to_string(dim));
  if (p) {
    if (!strict) return nb::none();
    raise_problem(p);
  }

  HostArray ids_in, scores_in;
  nb::object ids, scores;
  void* ids_data = nullptr;
  void* scores_data = nullptr;
  struct Out {
    nb::handle given;
    const char* name;
    bool f32;
    HostArray* view;
    nb::object* obj;
    void** data;
  } outs[2] = {{out_ids, "out_ids", false, &ids_in, &ids, &ids_data},
               {out_scores, "out_scores", true, &scores_in, &scores, &scores_data}};
  for (Out& o : outs) {
    if (o.given.is_none()) continue;
    Problem op = check_array(o.given.ptr(), o.name, o.f32, true, *o.view);
    if (!op) op = check_out_shape(*o.view, o.name, ndim, nq, k);
    if (op) {
      if (!strict) return nb::none();
      raise_problem(op);
    }
    *o.obj = nb::borrow(o.given);
    *o.data = o.view->data();
  }
  for (Out& o : outs) {
    if (!o.given.is_none()) continue;
    PyObject* made = new_output(ndim, nq, k, o.f32 ? hooks.dtype_f32 : hooks.dtype_u64, o.data);
    if (made == nullptr) {
      if (!strict) {
        PyErr_Clear();
        return nb::none();
      }
      throw nb::python_error();
    }
    *o.obj = nb::steal(made);
  }

  OptionsView o(opts);
  const mnemo_search_options* options = o.with_nprobe(nprobe);
  const float* qp = static_cast<const float*>(q.data());
  CallResult r;
  {
    nb::gil_scoped_release unlocked;
    r.status = mnemo_store_search(store_of(store), qp, nq, k, options, static_cast<uint64_t*>(ids_data),
                                  static_cast<float*>(scores_data));
    note_error(r);
  }
  check(r);
  return nb::make_tuple(ids, scores);
}

// mnemo_store_search on host pointers the caller vouches for (tests and
// measurements of the bare call).
void search_host_ptr(uintptr_t store, uintptr_t queries, uint64_t nq, uint64_t k, nb::handle opts, uintptr_t ids,
                     uintptr_t scores) {
  OptionsView o(opts);
  CallResult r;
  {
    nb::gil_scoped_release unlocked;
    r.status = mnemo_store_search(store_of(store), reinterpret_cast<const float*>(queries), nq, k, o.get(),
                                  reinterpret_cast<uint64_t*>(ids), reinterpret_cast<float*>(scores));
    note_error(r);
  }
  check(r);
}

// mnemo_store_search_device: device pointers (checked by the caller: device,
// dtype, shape, order, alignment) and the producer's stream (a cudaStream_t
// as an int; 0 is the default stream). Returns once the search is queued.
// status (an int32 in device memory, or 0) with opts None: the default
// options with the queries' check inside the search (check_on_device), its
// verdict written there, so the call never waits for the stream.
// nprobe: as search_host's (with a status too: the defaults plus nprobe).
void search_device(uintptr_t store, uintptr_t queries, uint64_t nq, uint64_t k, nb::handle opts, uintptr_t ids,
                   uintptr_t scores, uintptr_t stream, uintptr_t status, uint32_t nprobe) {
  OptionsView o(opts);
  mnemo_search_options checked = mnemo_search_options_default();
  if (status != 0 && o.get() != nullptr)
    throw nb::value_error("search_device: a device status goes with the default options only");
  const mnemo_search_options* used = o.with_nprobe(nprobe);
  if (status != 0) {
    checked.check_on_device = 1;
    checked.device_status = reinterpret_cast<int32_t*>(status);
    checked.nprobe = nprobe;
    used = &checked;
  }
  CallResult r;
  {
    nb::gil_scoped_release unlocked;
    r.status = mnemo_store_search_device(store_of(store), reinterpret_cast<const float*>(queries), nq, k, used,
                                         reinterpret_cast<uint64_t*>(ids), reinterpret_cast<float*>(scores),
                                         reinterpret_cast<void*>(stream));
    note_error(r);
  }
  check(r);
}

// The bare C call timed from C++ (no Python in the loop): nanoseconds of
// each of `reps` calls of mnemo_store_search on host pointers.
std::vector<double> time_search_host(uintptr_t store, uintptr_t queries, uint64_t nq, uint64_t k, uintptr_t ids,
                                     uintptr_t scores, int reps) {
  std::vector<double> out;
  out.reserve(reps > 0 ? (size_t)reps : 0);
  nb::gil_scoped_release unlocked;
  for (int i = 0; i < reps; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    mnemo_status s = mnemo_store_search(store_of(store), reinterpret_cast<const float*>(queries), nq, k, nullptr,
                                        reinterpret_cast<uint64_t*>(ids), reinterpret_cast<float*>(scores));
    auto t1 = std::chrono::steady_clock::now();
    if (s != MNEMO_OK) break;
    out.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count());
  }
  return out;
}

void configure(nb::handle make_error, nb::handle numpy, nb::handle aligned_empty) {
  nb::object dtype = numpy.attr("dtype");
  nb::object objects[] = {nb::borrow(make_error), nb::borrow(aligned_empty), numpy.attr("empty"),
                          numpy.attr("ndarray"),  dtype("uint64"),           dtype("float32")};
  PyObject** slots[] = {&hooks.make_error, &hooks.aligned_empty, &hooks.empty,
                        &hooks.ndarray,    &hooks.dtype_u64,     &hooks.dtype_f32};
  for (size_t i = 0; i < sizeof slots / sizeof slots[0]; ++i) {
    Py_XDECREF(*slots[i]);
    *slots[i] = objects[i].release().ptr();
  }
}

// Offsets and sizes of mnemo_search_options as compiled from mnemo.h, for
// the test that the ctypes mirror handed to search_* has the same layout.
nb::dict search_options_layout() {
  nb::dict d;
#define MNEMO_FIELD(f) \
  d[#f] = nb::make_tuple(offsetof(mnemo_search_options, f), sizeof(static_cast<mnemo_search_options*>(nullptr)->f))
  MNEMO_FIELD(struct_size);
  MNEMO_FIELD(filter_kind);
  MNEMO_FIELD(filter_ids);
  MNEMO_FIELD(filter_bitmap);
  MNEMO_FIELD(filter_count);
  MNEMO_FIELD(apply_bias);
  MNEMO_FIELD(reserved0);
  MNEMO_FIELD(activation);
  MNEMO_FIELD(normalize);
  MNEMO_FIELD(w_relevance);
  MNEMO_FIELD(w_recency);
  MNEMO_FIELD(w_importance);
  MNEMO_FIELD(touch);
  MNEMO_FIELD(half_life);
  MNEMO_FIELD(now);
  MNEMO_FIELD(check_on_device);
  MNEMO_FIELD(reserved1);
  MNEMO_FIELD(device_status);
  MNEMO_FIELD(nprobe);
  MNEMO_FIELD(reserved2);
  MNEMO_FIELD(where);
  MNEMO_FIELD(where_each);
#undef MNEMO_FIELD
  return d;
}

}  // namespace

NB_MODULE(_mnemo_ext, m) {
  m.doc() = "mnemo's compiled search calls over the C ABI (mnemo.h); private to the mnemo package";
  m.attr("ABI_VERSION") = MNEMO_ABI_VERSION;
  m.attr("ALIGNMENT") = MNEMO_ALIGNMENT;
  m.attr("SEARCH_OPTIONS_SIZE") = sizeof(mnemo_search_options);
  // The mnemo.h functions this module calls (the compiler checked each
  // against the header; python/tests/test_extension.py checks the list).
  m.attr("C_FUNCTIONS") =
      nb::make_tuple("mnemo_store_search", "mnemo_store_search_device", "mnemo_last_error", "mnemo_abi_version");
  m.def("configure", &configure, nb::arg("make_error"), nb::arg("numpy"), nb::arg("aligned_empty"));
  m.def("search_host", &search_host, nb::arg("store"), nb::arg("queries"), nb::arg("k"), nb::arg("opts").none(),
        nb::arg("dim"), nb::arg("out_ids").none(), nb::arg("out_scores").none(), nb::arg("strict"),
        nb::arg("nprobe") = 0);
  m.def("search_host_ptr", &search_host_ptr, nb::arg("store"), nb::arg("queries"), nb::arg("nq"), nb::arg("k"),
        nb::arg("opts").none(), nb::arg("ids"), nb::arg("scores"));
  m.def("search_device", &search_device, nb::arg("store"), nb::arg("queries"), nb::arg("nq"), nb::arg("k"),
        nb::arg("opts").none(), nb::arg("ids"), nb::arg("scores"), nb::arg("stream"), nb::arg("status") = 0,
        nb::arg("nprobe") = 0);
  m.def("time_search_host", &time_search_host, nb::arg("store"), nb::arg("queries"), nb::arg("nq"), nb::arg("k"),
        nb::arg("ids"), nb::arg("scores"), nb::arg("reps"));
  m.def("search_options_layout", &search_options_layout);
  // The address of mnemo_abi_version in the libmnemo this module was linked
  // with: equal to the one ctypes loaded when both use one library.
  m.def("library_address", []() { return (uintptr_t)&mnemo_abi_version; });
}

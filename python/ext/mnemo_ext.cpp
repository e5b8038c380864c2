// mnemo._mnemo_ext: the compiled half of the Python package. It makes the
// calls on the hot path of a search (mnemo_store_search and
// mnemo_store_search_device) and of reads (mnemo_store_read and its records)
// straight from C++, compiled against mnemo.h, so the compiler checks every
// signature; it packs what writes hand over (mnemo_memory_fields, key
// arrays) and what the framework adapters convert (metadata, embeddings)
// in one pass; the rest of the package calls the library through ctypes
// (python/mnemo/_cdefs.py).
//
// Everything here runs with the GIL held except the library call itself. A
// failed call's mnemo_last_error() text is read right after it, on the same
// thread, before the GIL is taken back.
#include <nanobind/nanobind.h>
#include <nanobind/stl/vector.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
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

// ---------------------------------------------------------------------------
// Fields of many memories packed for mnemo_store_add_with_fields and
// mnemo_store_update_fields in one pass (python/mnemo/fields.py FieldRows
// does the same per memory in Python, and stays the reference: it gives
// every refused argument its message).

// The packed mnemo_memory_fields [count] and what they point to. Strings
// point into the str and bytes objects of the columns (a str's UTF-8 form is
// kept by the str itself), which are held here.
struct PackedFields {
  std::vector<mnemo_memory_fields> rows;
  std::vector<const char*> texts;  // namespace parts and tags
  std::vector<mnemo_attribute> attributes;
  std::vector<nb::object> columns;  // the columns read, held
  uintptr_t address() const { return rows.empty() ? 0 : (uintptr_t)rows.data(); }
  uintptr_t texts_address() const { return texts.empty() ? 0 : (uintptr_t)texts.data(); }
};

// The UTF-8 bytes of an exact str without NUL, at most `limit` bytes and
// not empty unless `empty_ok`; nullptr (no Python error) when it is not.
const char* packed_text(PyObject* obj, uint64_t limit, bool empty_ok, Py_ssize_t* size = nullptr) {
  if (!PyUnicode_CheckExact(obj)) return nullptr;
  Py_ssize_t n = 0;
  const char* s = PyUnicode_AsUTF8AndSize(obj, &n);
  if (s == nullptr) {
    PyErr_Clear();  // lone surrogates: FieldRows encodes them
    return nullptr;
  }
  if ((n == 0 && !empty_ok) || (uint64_t)n > limit || std::memchr(s, 0, (size_t)n) != nullptr) return nullptr;
  if (size != nullptr) *size = n;
  return s;
}

// The entries of an exact list or tuple.
bool sequence_items(PyObject* obj, PyObject*** items, Py_ssize_t* n) {
  if (PyList_CheckExact(obj)) {
    *items = PySequence_Fast_ITEMS(obj);
    *n = PyList_GET_SIZE(obj);
    return true;
  }
  if (PyTuple_CheckExact(obj)) {
    *items = PySequence_Fast_ITEMS(obj);
    *n = PyTuple_GET_SIZE(obj);
    return true;
  }
  return false;
}

// Appends the texts of a list or tuple of str (namespace parts or tags) to
// p.texts; false when one is not packable here.
bool pack_texts(PackedFields& p, PyObject* obj, uint32_t max_count, uint32_t* count) {
  PyObject** items = nullptr;
  Py_ssize_t n = 0;
  if (!sequence_items(obj, &items, &n) || (uint64_t)n > max_count) return false;
  for (Py_ssize_t j = 0; j < n; ++j) {
    const char* s = packed_text(items[j], MNEMO_MAX_NAME_BYTES, false);
    if (s == nullptr) return false;
    p.texts.push_back(s);
  }
  *count = (uint32_t)n;
  return true;
}

bool pack_attributes(PackedFields& p, PyObject* obj, uint32_t* count) {
  if (!PyDict_CheckExact(obj) || (uint64_t)PyDict_GET_SIZE(obj) > MNEMO_MAX_ATTRIBUTES) return false;
  PyObject* name = nullptr;
  PyObject* value = nullptr;
  Py_ssize_t pos = 0;
  while (PyDict_Next(obj, &pos, &name, &value)) {
    mnemo_attribute a{};
    a.name = packed_text(name, MNEMO_MAX_NAME_BYTES, false);
    if (a.name == nullptr) return false;
    if (value == Py_True || value == Py_False) {
      a.value.type = MNEMO_VALUE_BOOL;
      a.value.i = value == Py_True;
    } else if (PyLong_CheckExact(value)) {
      int overflow = 0;
      long long v = PyLong_AsLongLongAndOverflow(value, &overflow);
      if (overflow != 0 || (v == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return false;
      }
      a.value.type = MNEMO_VALUE_INT;
      a.value.i = v;
    } else if (PyFloat_CheckExact(value)) {
      double v = PyFloat_AS_DOUBLE(value);
      if (!std::isfinite(v)) return false;
      a.value.type = MNEMO_VALUE_DOUBLE;
      a.value.d = v;
    } else {
      a.value.type = MNEMO_VALUE_STRING;
      a.value.s = packed_text(value, MNEMO_MAX_NAME_BYTES, true);
      if (a.value.s == nullptr) return false;
    }
    p.attributes.push_back(a);
  }
  *count = (uint32_t)PyDict_GET_SIZE(obj);
  return true;
}

bool pack_payload(PyObject* obj, mnemo_memory_fields& f) {
  const char* data = nullptr;
  Py_ssize_t n = 0;
  if (PyBytes_CheckExact(obj)) {
    data = PyBytes_AS_STRING(obj);
    n = PyBytes_GET_SIZE(obj);
  } else if (PyUnicode_CheckExact(obj)) {
    data = PyUnicode_AsUTF8AndSize(obj, &n);
    if (data == nullptr) {
      PyErr_Clear();
      return false;
    }
  } else {
    return false;
  }
  if ((uint64_t)n > MNEMO_MAX_PAYLOAD_BYTES) return false;
  f.payload = n != 0 ? data : nullptr;
  f.payload_bytes = (uint64_t)n;
  return true;
}

// pack_fields(count, keys, namespaces, tags, attributes, payloads): the
// columns of Store.add / update_fields packed as mnemo_memory_fields
// [count], or None when any entry is other than the plain types packed here
// (exact str, list, tuple, dict, int, float, bool, bytes) or past a limit:
// the caller then packs them in Python, which refuses what must be refused.
nb::object pack_fields(uint64_t count, nb::handle keys, nb::handle namespaces, nb::handle tags, nb::handle attributes,
                       nb::handle payloads) {
  enum Column { kKey, kNamespace, kTags, kAttributes, kPayload };
  const uint32_t bits[] = {MNEMO_FIELD_KEY, MNEMO_FIELD_NAMESPACE, MNEMO_FIELD_TAGS, MNEMO_FIELD_ATTRIBUTES,
                           MNEMO_FIELD_PAYLOAD};
  nb::handle given[] = {keys, namespaces, tags, attributes, payloads};
  PyObject** items[5] = {};
  auto packed = std::make_unique<PackedFields>();
  PackedFields& p = *packed;
  for (int c = 0; c < 5; ++c) {
    if (given[c].is_none()) continue;
    Py_ssize_t n = 0;
    if (!sequence_items(given[c].ptr(), &items[c], &n) || (uint64_t)n != count) return nb::none();
    p.columns.push_back(nb::borrow(given[c]));
  }
  mnemo_memory_fields blank{};
  blank.struct_size = sizeof(mnemo_memory_fields);
  p.rows.assign(count, blank);
  // Where each row's texts and attributes start in p.texts / p.attributes
  // (pointers are taken once the vectors stop growing).
  std::vector<size_t> ns_at(count), tags_at(count), attrs_at(count);
  for (uint64_t i = 0; i < count; ++i) {
    mnemo_memory_fields& f = p.rows[i];
    for (int c = 0; c < 5; ++c) {
      if (items[c] == nullptr) continue;
      PyObject* v = items[c][i];
      if (v == Py_None) continue;
      f.set |= bits[c];
      bool ok = true;
      switch (c) {
        case kKey: {
          const char* s = packed_text(v, MNEMO_MAX_KEY_BYTES, true);
          ok = s != nullptr;
          f.key = ok && *s ? s : nullptr;
          break;
        }
        case kNamespace:
          ns_at[i] = p.texts.size();
          ok = pack_texts(p, v, MNEMO_MAX_NAMESPACE_DEPTH, &f.namespace_depth);
          break;
        case kTags:
          tags_at[i] = p.texts.size();
          ok = pack_texts(p, v, MNEMO_MAX_TAGS, &f.tag_count);
          break;
        case kAttributes:
          attrs_at[i] = p.attributes.size();
          ok = pack_attributes(p, v, &f.attribute_count);
          break;
        default: ok = pack_payload(v, f);
      }
      if (!ok) return nb::none();
    }
  }
  for (uint64_t i = 0; i < count; ++i) {
    mnemo_memory_fields& f = p.rows[i];
    if (f.namespace_depth != 0) f.namespace_parts = p.texts.data() + ns_at[i];
    if (f.tag_count != 0) f.tags = p.texts.data() + tags_at[i];
    if (f.attribute_count != 0) f.attributes = p.attributes.data() + attrs_at[i];
  }
  return nb::cast(packed.release(), nb::rv_policy::take_ownership);
}

// pack_keys(keys): the char* [len(keys)] of a list of exact str without NUL
// (any length, empty too) for mnemo_store_ids_of_keys, as a _PackedFields
// whose texts_address is the array's; None for anything else (the caller
// then checks them in Python, which refuses what must be refused).
nb::object pack_keys(nb::handle keys) {
  PyObject** items = nullptr;
  Py_ssize_t n = 0;
  if (!PyList_CheckExact(keys.ptr()) || !sequence_items(keys.ptr(), &items, &n)) return nb::none();
  auto packed = std::make_unique<PackedFields>();
  packed->texts.reserve((size_t)n);
  for (Py_ssize_t i = 0; i < n; ++i) {
    const char* s = packed_text(items[i], UINT64_MAX, true);
    if (s == nullptr) return nb::none();
    packed->texts.push_back(s);
  }
  packed->columns.push_back(nb::borrow(keys));
  return nb::cast(packed.release(), nb::rv_policy::take_ownership);
}

// Whether a metadata name is its own attribute name in the framework
// adapters' projection (python/mnemo/integrations/_common.py project): an
// exact str, not empty, without NUL, "\\", ".", "=" or "\x1f", at most
// MNEMO_MAX_NAME_BYTES bytes.
bool plain_name(PyObject* name) {
  Py_ssize_t n = 0;
  const char* s = packed_text(name, MNEMO_MAX_NAME_BYTES, false, &n);
  if (s == nullptr) return false;
  for (Py_ssize_t i = 0; i < n; ++i) {
    char c = s[i];
    if (c == '\\' || c == '.' || c == '=' || c == '\x1f') return false;
  }
  return true;
}

// Whether a metadata value is an attribute value as the projection keeps it:
// an exact str of at most MNEMO_MAX_NAME_BYTES bytes without NUL, an int in
// int64, a bool or a finite float.
bool plain_value(PyObject* v) {
  if (v == Py_True || v == Py_False) return true;
  if (PyLong_CheckExact(v)) {
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow != 0 || (x == -1 && PyErr_Occurred())) {
      PyErr_Clear();
      return false;
    }
    return true;
  }
  if (PyFloat_CheckExact(v)) return std::isfinite(PyFloat_AS_DOUBLE(v));
  return packed_text(v, MNEMO_MAX_NAME_BYTES, true) != nullptr;
}

// project_plain(metas, skip): the attributes of each metadata dict (None: no
// metadata) when every one is flat and plain: names as plain_name, values
// as plain_value or None (left out, as the projection leaves them); names in
// `skip` (a tuple of str) are left out whatever their value. None when any
// dict is other than that: the caller then projects them in Python.
nb::object project_plain(nb::handle metas, nb::handle skip) {
  PyObject** items = nullptr;
  Py_ssize_t n = 0;
  if (!PyList_CheckExact(metas.ptr()) || !sequence_items(metas.ptr(), &items, &n) || !PyTuple_CheckExact(skip.ptr()))
    return nb::none();
  Py_ssize_t skips = PyTuple_GET_SIZE(skip.ptr());
  nb::object out = nb::steal(PyList_New(n));
  if (!out.is_valid()) throw nb::python_error();
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* meta = items[i];
    nb::object attrs = nb::steal(PyDict_New());
    if (!attrs.is_valid()) throw nb::python_error();
    if (meta != Py_None) {
      if (!PyDict_CheckExact(meta) || PyDict_GET_SIZE(meta) > (Py_ssize_t)MNEMO_MAX_ATTRIBUTES) return nb::none();
      PyObject* name = nullptr;
      PyObject* value = nullptr;
      Py_ssize_t pos = 0;
      while (PyDict_Next(meta, &pos, &name, &value)) {
        bool skipped = false;
        for (Py_ssize_t j = 0; j < skips && !skipped; ++j) {
          PyObject* s = PyTuple_GET_ITEM(skip.ptr(), j);
          skipped = PyUnicode_CheckExact(name) && PyUnicode_Compare(name, s) == 0;
        }
        if (skipped) continue;
        if (!plain_name(name)) return nb::none();
        if (value == Py_None) continue;
        if (!plain_value(value)) return nb::none();
        if (PyDict_SetItem(attrs.ptr(), name, value) != 0) throw nb::python_error();
      }
    }
    PyList_SET_ITEM(out.ptr(), i, attrs.release().ptr());
  }
  return out;
}

// The `dim` exact floats of the list `row` (its size checked by the caller)
// into out as float32; false, out partly written, at any other item.
bool list_floats(PyObject* row, uint64_t dim, float* out) {
  PyObject** items = PySequence_Fast_ITEMS(row);
  for (uint64_t j = 0; j < dim; ++j) {
    if (!PyFloat_CheckExact(items[j])) return false;
    out[j] = (float)PyFloat_AS_DOUBLE(items[j]);
  }
  return true;
}

// float32_rows(rows, dim): a new float32 numpy array [len(rows), dim] of a
// list of lists of `dim` floats each (embeddings as the frameworks hand
// them over), converted here without a Python object per value; None when
// an entry is anything else (the caller then converts with numpy).
nb::object float32_rows(nb::handle rows, uint64_t dim) {
  PyObject** items = nullptr;
  Py_ssize_t n = 0;
  if (!PyList_CheckExact(rows.ptr()) || !sequence_items(rows.ptr(), &items, &n) || dim == 0) return nb::none();
  for (Py_ssize_t i = 0; i < n; ++i)
    if (!PyList_CheckExact(items[i]) || (uint64_t)PyList_GET_SIZE(items[i]) != dim) return nb::none();
  void* data = nullptr;
  nb::object out = nb::steal(new_output(2, (uint64_t)n, dim, hooks.dtype_f32, &data));
  if (!out.is_valid()) throw nb::python_error();
  float* at = static_cast<float*>(data);
  for (Py_ssize_t i = 0; i < n; ++i, at += dim)
    if (!list_floats(items[i], dim, at)) return nb::none();
  return out;
}

// ---------------------------------------------------------------------------
// Memories read back for the framework adapters: key, namespace, payload and
// time of each (python/mnemo/integrations/_common.py Row), without the tags
// and attributes that Store.read turns into Python objects too.

PyObject* text_object(const char* s) { return PyUnicode_DecodeUTF8(s, (Py_ssize_t)std::strlen(s), "surrogateescape"); }

// A tuple of the texts parts[0..n).
PyObject* texts_tuple(const char* const* parts, uint32_t n) {
  PyObject* t = PyTuple_New((Py_ssize_t)n);
  if (t == nullptr) return nullptr;
  for (uint32_t j = 0; j < n; ++j) {
    PyObject* s = text_object(parts[j]);
    if (s == nullptr) {
      Py_DECREF(t);
      return nullptr;
    }
    PyTuple_SET_ITEM(t, j, s);
  }
  return t;
}

// mnemo_store_read_fields of ids[0..n) with the GIL released; the records
// are destroyed with the returned handle (a library error raises).
using Records = std::unique_ptr<mnemo_records, void (*)(mnemo_records*)>;
Records read_records(uintptr_t store, const uint64_t* ids, uint64_t n,
                     uint32_t fields = MNEMO_FIELD_ALL | MNEMO_READ_META) {
  mnemo_records* records = nullptr;
  CallResult r;
  {
    nb::gil_scoped_release unlocked;
    r.status = mnemo_store_read_fields(store_of(store), n ? ids : nullptr, n, fields, &records);
    note_error(r);
  }
  check(r);
  return Records(records, mnemo_records_destroy);
}

// ids as a one-dimensional uint64 array (C-contiguous, aligned), else the
// package's error.
void check_ids(nb::handle ids_obj, HostArray& ids) {
  Problem p = check_array(ids_obj.ptr(), "ids", false, false, ids);
  if (!p && ids.view().ndim != 1) p = problem(kValue, MNEMO_E_SHAPE, "ids must be one-dimensional");
  if (p) raise_problem(p);
}

// A row_type instance (a tuple subclass) of (id, key, namespace, payload,
// time) for entry i of `records` (fields not read come back None, (), b""
// and 0.0), Py_None for an id not found, nullptr with a Python error set on
// failure.
PyObject* record_row(const mnemo_records* records, uint64_t i, PyObject* row_type) {
  uint32_t found = 0;
  uint64_t id = 0;
  double time = 0;
  mnemo_memory_fields f = mnemo_memory_fields_default();
  f.struct_size = sizeof f;
  mnemo_status s = mnemo_records_get(records, i, &found, &id, &f, &time, nullptr);
  if (s != MNEMO_OK) raise_error(kLibrary, s, mnemo_last_error() ? mnemo_last_error() : "");
  if (!found) {
    Py_INCREF(Py_None);
    return Py_None;
  }
  PyObject* items[5] = {
      PyLong_FromUnsignedLongLong(id), f.key != nullptr ? text_object(f.key) : (Py_INCREF(Py_None), Py_None),
      texts_tuple(f.namespace_parts, f.namespace_depth),
      PyBytes_FromStringAndSize(static_cast<const char*>(f.payload), f.payload_bytes ? (Py_ssize_t)f.payload_bytes : 0),
      PyFloat_FromDouble(time)};
  bool ok = true;
  for (PyObject* a : items) ok = ok && a != nullptr;
  // Filled in place as tuple.__new__ fills a subclass's instance: one
  // object, without the argument tuples of a call to row_type.
  PyObject* row = ok ? ((PyTypeObject*)row_type)->tp_alloc((PyTypeObject*)row_type, 5) : nullptr;
  if (row == nullptr) {
    for (PyObject* a : items) Py_XDECREF(a);
    return nullptr;
  }
  for (Py_ssize_t j = 0; j < 5; ++j) PyTuple_SET_ITEM(row, j, items[j]);
  return row;
}

// A record's attribute value as Python's int, float, bool or str; nullptr
// with a Python error set on failure (an unknown type: the package's
// MnemoValueError, E_INTERNAL).
PyObject* value_object(const mnemo_value& v) {
  switch (v.type) {
    case MNEMO_VALUE_INT: return PyLong_FromLongLong((long long)v.i);
    case MNEMO_VALUE_DOUBLE: return PyFloat_FromDouble(v.d);
    case MNEMO_VALUE_BOOL: return PyBool_FromLong(v.i != 0);
    case MNEMO_VALUE_STRING: return text_object(v.s != nullptr ? v.s : "");
    default:
      raise_error(kValue, MNEMO_E_INTERNAL, "the library returned a value of unknown type " + std::to_string(v.type));
  }
}

// read_memories(store, ids, memory_type): Store.read. mnemo_store_read of
// `ids` (a uint64 array, C-contiguous and aligned); per id, None when it is
// not in the store, else memory_type(id, key, namespace, tags, attributes,
// payload, time, importance) (mnemo.fields.Memory).
nb::list read_memories(uintptr_t store, nb::handle ids_obj, nb::handle memory_type) {
  HostArray ids;
  check_ids(ids_obj, ids);
  uint64_t n = ids.size();
  nb::list out;
  const Records records = read_records(store, static_cast<const uint64_t*>(ids.data()), n);
  for (uint64_t i = 0; i < n; ++i) {
    uint32_t found = 0;
    uint64_t id = 0;
    double time = 0;
    float importance = 0;
    mnemo_memory_fields f = mnemo_memory_fields_default();
    mnemo_status s = mnemo_records_get(records.get(), i, &found, &id, &f, &time, &importance);
    if (s != MNEMO_OK) raise_error(kLibrary, s, mnemo_last_error() ? mnemo_last_error() : "");
    if (!found) {
      out.append(nb::none());
      continue;
    }
    nb::object attrs = nb::steal(PyDict_New());
    if (!attrs.is_valid()) throw nb::python_error();
    for (uint32_t j = 0; j < f.attribute_count; ++j) {
      nb::object name = nb::steal(text_object(f.attributes[j].name));
      nb::object value = nb::steal(value_object(f.attributes[j].value));
      if (!name.is_valid() || !value.is_valid() || PyDict_SetItem(attrs.ptr(), name.ptr(), value.ptr()) != 0)
        throw nb::python_error();
    }
    PyObject* args[8] = {PyLong_FromUnsignedLongLong(id),
                         f.key != nullptr ? text_object(f.key) : (Py_INCREF(Py_None), Py_None),
                         texts_tuple(f.namespace_parts, f.namespace_depth),
                         texts_tuple(f.tags, f.tag_count),
                         (Py_INCREF(attrs.ptr()), attrs.ptr()),
                         PyBytes_FromStringAndSize(static_cast<const char*>(f.payload),
                                                   f.payload_bytes ? (Py_ssize_t)f.payload_bytes : 0),
                         PyFloat_FromDouble(time),
                         PyFloat_FromDouble((double)importance)};
    bool ok = true;
    for (PyObject* a : args) ok = ok && a != nullptr;
    PyObject* m = ok ? PyObject_Vectorcall(memory_type.ptr(), args, 8, nullptr) : nullptr;
    for (PyObject* a : args) Py_XDECREF(a);
    if (m == nullptr) throw nb::python_error();
    out.append(nb::steal(m));
  }
  return out;
}

// read_rows(store, ids, scores, row_type, fields): mnemo_store_read_fields
// of `ids` (a uint64 array, C-contiguous and aligned, as the package's
// checks leave it, or, without scores, a list of ints); fields: the
// MNEMO_FIELD_* bits to read (key, namespace and payload are the row's)
// and MNEMO_READ_META for its time.
// scores None: a row_type or None per id. scores (float32, one per id): the
// entries before the first NO_ID as (id, score, row_type or None), the form
// of a search's results.
void check_row_type(nb::handle row_type, const char* function) {
  if (!PyType_Check(row_type.ptr()) || !PyType_IsSubtype((PyTypeObject*)row_type.ptr(), &PyTuple_Type))
    throw nb::type_error((std::string(function) + ": row_type must be a tuple type").c_str());
}

nb::list read_rows(uintptr_t store, nb::handle ids_obj, nb::handle scores_obj, nb::handle row_type, uint32_t fields) {
  check_row_type(row_type, "read_rows");
  HostArray ids;
  uint64_t n = 0;
  const uint64_t* id_data = nullptr;
  // A list of ints (without scores): copied into an aligned buffer.
  std::vector<uint64_t> listed;
  if (PyList_CheckExact(ids_obj.ptr()) && scores_obj.is_none()) {
    Py_ssize_t count = PyList_GET_SIZE(ids_obj.ptr());
    listed.resize((size_t)count + 2);
    uint64_t* at = listed.data();
    if ((uintptr_t)at % MNEMO_ALIGNMENT != 0) ++at;
    for (Py_ssize_t i = 0; i < count; ++i) {
      PyObject* v = PyList_GET_ITEM(ids_obj.ptr(), i);
      unsigned long long id = PyLong_CheckExact(v) ? PyLong_AsUnsignedLongLong(v) : (unsigned long long)-1;
      if (id == (unsigned long long)-1) {
        PyErr_Clear();
        raise_error(kValue, MNEMO_E_INVALID_ARGUMENT,
                    "ids[" + std::to_string(i) + "] is not an id (an int below 2^64 - 1)");
      }
      at[i] = id;
    }
    n = (uint64_t)count;
    id_data = at;
  } else {
    check_ids(ids_obj, ids);
    n = ids.size();
    id_data = static_cast<const uint64_t*>(ids.data());
  }
  HostArray scores;
  const float* score_data = nullptr;
  if (!scores_obj.is_none()) {
    Problem sp = check_array(scores_obj.ptr(), "scores", true, false, scores);
    if (!sp && scores.size() != n) sp = problem(kValue, MNEMO_E_SHAPE, "scores must have one entry per id");
    if (sp) raise_problem(sp);
    score_data = static_cast<const float*>(scores.data());
    uint64_t m = 0;
    while (m < n && id_data[m] != MNEMO_NO_ID) ++m;
    n = m;
  }
  nb::list out;
  if (n == 0) return out;
  const Records records = read_records(store, id_data, n, fields);
  for (uint64_t i = 0; i < n; ++i) {
    nb::object row = nb::steal(record_row(records.get(), i, row_type.ptr()));
    if (!row.is_valid()) throw nb::python_error();
    if (score_data == nullptr) {
      out.append(row);
      continue;
    }
    nb::object hit = nb::steal(PyTuple_Pack(3, nb::steal(PyLong_FromUnsignedLongLong(id_data[i])).ptr(),
                                            nb::steal(PyFloat_FromDouble(score_data[i])).ptr(), row.ptr()));
    if (!hit.is_valid()) throw nb::python_error();
    out.append(hit);
  }
  return out;
}

// search_rows(store, query, k, where, dim, fields, row_type): one query's
// search and the hits' records in one call from Python, the GIL released
// over both: mnemo_store_search (`where`: a mnemo_filter* as an int, 0 for
// none) then mnemo_store_read_fields of the hits, with the ids and scores in
// a buffer of the call instead of numpy arrays. Returns the hits before the
// first NO_ID as (id, score, row_type), best first; a hit removed by another
// thread between the two calls is left out. The query: an exact numpy
// float32 [dim] array, C-contiguous and aligned, or an exact list of dim
// exact floats (as the frameworks hand embeddings over), converted by
// list_floats as float32_rows converts its rows. None, having called
// nothing, for any other query or a k not an int from 1 to 4096 (the caller
// then goes through Store.search).
// The calls of search_rows on this thread and the seconds their searches
// took (mnemo_store_search alone), for the measurement of what a call adds
// to its search (bench/integrations).
thread_local uint64_t search_rows_count = 0;
thread_local double search_rows_seconds = 0;

nb::tuple search_rows_time() { return nb::make_tuple(search_rows_count, search_rows_seconds); }

nb::object search_rows(uintptr_t store, nb::handle query, nb::handle k_obj, uintptr_t where, uint64_t dim,
                       uint32_t fields, nb::handle row_type) {
  check_row_type(row_type, "search_rows");
  const bool is_array = Py_TYPE(query.ptr()) == (PyTypeObject*)hooks.ndarray;
  if ((!is_array && !PyList_CheckExact(query.ptr())) || !PyLong_CheckExact(k_obj.ptr())) return nb::none();
  const long long k = PyLong_AsLongLong(k_obj.ptr());
  if (k < 1 || k > 4096) {
    PyErr_Clear();
    return nb::none();
  }
  HostArray q;
  const float* query_data = nullptr;
  // A list query's values, aligned; the search runs on this thread.
  thread_local std::vector<float> listed;
  if (is_array) {
    if (check_array(query.ptr(), "query", true, false, q) || q.view().ndim != 1 || (uint64_t)q.view().shape[0] != dim)
      return nb::none();
    query_data = static_cast<const float*>(q.data());
  } else {
    if (dim == 0 || (uint64_t)PyList_GET_SIZE(query.ptr()) != dim) return nb::none();
    listed.resize(dim + MNEMO_ALIGNMENT / sizeof(float));
    float* at = listed.data();
    while ((uintptr_t)at % MNEMO_ALIGNMENT != 0) ++at;
    if (!list_floats(query.ptr(), dim, at)) return nb::none();
    query_data = at;
  }
  // ids then scores, 16-byte aligned each (k rounded up to a multiple of 4).
  const size_t kk = ((size_t)k + 3) & ~(size_t)3;
  std::vector<uint64_t> buffer(kk + kk / 2 + 2);
  uint64_t* ids = buffer.data();
  if ((uintptr_t)ids % MNEMO_ALIGNMENT != 0) ++ids;
  float* scores = reinterpret_cast<float*>(ids + kk);
  mnemo_search_options opts = mnemo_search_options_default();
  opts.where = reinterpret_cast<const mnemo_filter*>(where);
  mnemo_records* got = nullptr;
  uint64_t n = 0;
  CallResult r;
  {
    nb::gil_scoped_release unlocked;
    const auto t0 = std::chrono::steady_clock::now();
    r.status = mnemo_store_search(store_of(store), query_data, 1, (uint64_t)k, &opts, ids, scores);
    search_rows_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ++search_rows_count;
    if (r.status == MNEMO_OK) {
      while (n < (uint64_t)k && ids[n] != MNEMO_NO_ID) ++n;
      if (n > 0) r.status = mnemo_store_read_fields(store_of(store), ids, n, fields, &got);
    }
    note_error(r);
  }
  check(r);
  const Records records(got, mnemo_records_destroy);
  nb::list out;
  for (uint64_t i = 0; i < n; ++i) {
    PyObject* row = record_row(records.get(), i, row_type.ptr());
    if (row == nullptr) throw nb::python_error();
    if (row == Py_None) {
      Py_DECREF(row);
      continue;
    }
    PyObject* hit = PyTuple_New(3);
    PyObject* id = PyLong_FromUnsignedLongLong(ids[i]);
    PyObject* score = PyFloat_FromDouble(scores[i]);
    if (hit == nullptr || id == nullptr || score == nullptr) {
      Py_XDECREF(hit);
      Py_XDECREF(id);
      Py_XDECREF(score);
      Py_DECREF(row);
      throw nb::python_error();
    }
    PyTuple_SET_ITEM(hit, 0, id);
    PyTuple_SET_ITEM(hit, 1, score);
    PyTuple_SET_ITEM(hit, 2, row);
    out.append(nb::steal(hit));
  }
  nb::object result = std::move(out);
  return result;
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
  m.attr("C_FUNCTIONS") = nb::make_tuple("mnemo_store_search", "mnemo_store_search_device", "mnemo_last_error",
                                         "mnemo_abi_version", "mnemo_store_read", "mnemo_store_read_fields",
                                         "mnemo_records_get", "mnemo_records_destroy", "mnemo_memory_fields_default");
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
  nb::class_<PackedFields>(m, "_PackedFields")
      .def_prop_ro("address", &PackedFields::address)
      .def_prop_ro("texts_address", &PackedFields::texts_address);
  m.def("pack_keys", &pack_keys, nb::arg("keys"));
  m.def("project_plain", &project_plain, nb::arg("metas"), nb::arg("skip"));
  m.def("float32_rows", &float32_rows, nb::arg("rows"), nb::arg("dim"));
  m.def("pack_fields", &pack_fields, nb::arg("count"), nb::arg("keys").none(), nb::arg("namespaces").none(),
        nb::arg("tags").none(), nb::arg("attributes").none(), nb::arg("payloads").none());
  m.def("read_memories", &read_memories, nb::arg("store"), nb::arg("ids"), nb::arg("memory_type"));
  m.def(
      "read_rows", &read_rows, nb::arg("store"), nb::arg("ids"), nb::arg("scores").none(), nb::arg("row_type"),
      nb::arg("fields") = (uint32_t)(MNEMO_FIELD_KEY | MNEMO_FIELD_NAMESPACE | MNEMO_FIELD_PAYLOAD | MNEMO_READ_META));
  m.def("search_rows", &search_rows, nb::arg("store"), nb::arg("query"), nb::arg("k"), nb::arg("where"), nb::arg("dim"),
        nb::arg("fields"), nb::arg("row_type"));
  m.def("search_rows_time", &search_rows_time);
  // The address of mnemo_abi_version in the libmnemo this module was linked
  // with: equal to the one ctypes loaded when both use one library.
  m.def("library_address", []() { return (uintptr_t)&mnemo_abi_version; });
}

// nmt for Python: the runtime's public API (include/nmt/translator.h) as
// the module nmt._nmt, which python/nmt/__init__.py re-exports. Decoding
// runs without the GIL, so Python threads translate side by side; a call
// runs on a thread of its own while the caller's thread waits, taking the
// GIL every 50 ms to let Python see a Ctrl-C, which then stops the call at
// its next decoding step (TranslationOptions::cancel) and raises
// KeyboardInterrupt. Errors: InputError is ValueError, IoError OSError,
// with the one-line message the nmt program prints.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <nmt/translator.h>

#include <atomic>
#include <chrono>
#include <future>
#include <optional>
#include <string>
#include <vector>

namespace py = pybind11;

namespace {

// path: str or os.PathLike.
std::string fspath(const py::object& path) {
  return py::module_::import("os").attr("fspath")(path).cast<std::string>();
}

template <class Choice>
std::optional<Choice> choice(const std::optional<std::string>& name, Choice (*parse)(const std::string&, const std::string&),
                             const char* what) {
  if (!name) return std::nullopt;
  return parse(*name, what);
}

// The call `work` (given the cancel flag it must pass on) on a thread of
// its own; this thread waits without the GIL, checking for signals.
template <class Work>
auto interruptible(Work work) {
  std::atomic<bool> cancel{false};
  auto done = std::async(std::launch::async, [&] { return work(&cancel); });
  for (;;) {
    {
      py::gil_scoped_release release;
      if (done.wait_for(std::chrono::milliseconds(50)) == std::future_status::ready) break;
    }
    if (PyErr_CheckSignals() != 0) {
      // A handler raised (KeyboardInterrupt): stop the call, wait for it to end, raise.
      py::error_already_set raised;
      cancel = true;
      {
        py::gil_scoped_release release;
        done.wait();
      }
      try {
        done.get();
      } catch (const nmt::Cancelled&) {
      } catch (...) {
      }
      throw raised;
    }
  }
  return done.get();
}

nmt::TranslationOptions translation_options(std::optional<int> beam_size, std::optional<double> length_penalty,
                                            std::optional<int> max_decoding_length, const py::object& max_length_factor,
                                            std::optional<int> max_batch_size,
                                            std::optional<bool> placeholder_constraint) {
  nmt::TranslationOptions o;
  o.beam_size = beam_size;
  o.length_penalty = length_penalty;
  o.max_decoding_length = max_decoding_length;
  o.max_batch_size = max_batch_size;
  o.placeholder_constraint = placeholder_constraint;
  if (py::isinstance<py::str>(max_length_factor)) {
    if (max_length_factor.cast<std::string>() != "auto")
      throw nmt::InputError("max_length_factor: '" + max_length_factor.cast<std::string>() +
                            "' is not a number or 'auto'");
    o.max_length_factor = nmt::TranslationOptions::kAutoLengthFactor;
  } else if (!max_length_factor.is_none()) {
    o.max_length_factor = max_length_factor.cast<double>();
  }
  return o;
}

std::string repr_result(const nmt::TranslationResult& r) {
  std::string out = "TranslationResult(hypotheses=" + py::repr(py::cast(r.hypotheses)).cast<std::string>();
  if (r.source_cut) out += ", source_cut=True";
  if (r.length_limited) out += ", length_limited=True";
  if (!r.placeholders_lost.empty())
    out += ", placeholders_lost=" + py::repr(py::cast(r.placeholders_lost)).cast<std::string>();
  return out + ")";
}

}  // namespace

PYBIND11_MODULE(_nmt, m) {
  m.doc() = "nmt's translation runtime (Chinese to English), no PyTorch needed";
  m.attr("__version__") = NMT_VERSION;

  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const nmt::InputError& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const nmt::IoError& e) {
      PyErr_SetString(PyExc_OSError, e.what());
    } catch (const nmt::Cancelled& e) {
      PyErr_SetString(PyExc_KeyboardInterrupt, e.what());
    }
  });

  py::class_<nmt::TranslationResult>(m, "TranslationResult",
                                     "One line's translation: hypotheses[0] is the text.")
      .def_readonly("hypotheses", &nmt::TranslationResult::hypotheses, "the translation (best first)")
      .def_readonly("source_tokens", &nmt::TranslationResult::source_tokens,
                    "source pieces the model read of the line")
      .def_readonly("source_cut", &nmt::TranslationResult::source_cut,
                    "the line was longer than the model reads: its first source_tokens were translated")
      .def_readonly("length_limited", &nmt::TranslationResult::length_limited,
                    "the translation stopped at the length limit before ending (it may be cut short)")
      .def_readonly("placeholders_lost", &nmt::TranslationResult::placeholders_lost,
                    "placeholders of the line (%s, {0}, ...) the translation lacks")
      .def("__repr__", &repr_result);

  py::class_<nmt::TranslationStats>(m, "TranslationStats", "What translate_file did.")
      .def_readonly("lines", &nmt::TranslationStats::lines)
      .def_readonly("seconds", &nmt::TranslationStats::seconds)
      .def_readonly("source_cut", &nmt::TranslationStats::source_cut)
      .def_readonly("length_limited", &nmt::TranslationStats::length_limited)
      .def_readonly("placeholders_lost", &nmt::TranslationStats::placeholders_lost)
      .def("__repr__", [](const nmt::TranslationStats& s) {
        return "TranslationStats(lines=" + std::to_string(s.lines) + ", seconds=" + std::to_string(s.seconds) + ")";
      });

  py::class_<nmt::Translator>(m, "Translator",
                              "A trained model opened for translation. Arguments left None take the checkpoint's "
                              "config. Its methods may be called from several threads at once.")
      .def(py::init([](const py::object& path, std::optional<std::string> device,
                       std::optional<std::string> compute_type, std::optional<int> threads,
                       std::optional<std::string> attention, std::optional<int> parallel_batches) {
             nmt::TranslatorOptions o;
             o.device = choice<nmt::Device>(device, nmt::parse_device, "device");
             o.compute_type = choice<nmt::ComputeType>(compute_type, nmt::parse_compute_type, "compute_type");
             o.attention = choice<nmt::AttentionBackend>(attention, nmt::parse_attention, "attention");
             o.threads = threads;
             o.parallel_batches = parallel_batches;
             const std::string dir = fspath(path);
             py::gil_scoped_release release;
             return std::make_unique<nmt::Translator>(dir, o);
           }),
           py::arg("path"), py::kw_only(), py::arg("device") = py::none(), py::arg("compute_type") = py::none(),
           py::arg("threads") = py::none(), py::arg("attention") = py::none(),
           py::arg("parallel_batches") = py::none(),
           "path: a checkpoint folder or a run folder (its best/, else last/). device: 'cpu' (or 'auto'); "
           "compute_type: 'float32', 'bf16', 'int8' or 'auto'; threads: 0 = every core; attention: 'flash' or "
           "'naive'; parallel_batches: searches side by side (1: one at a time, every thread on it).")
      .def(
          "translate_batch",
          [](const nmt::Translator& t, const std::vector<std::string>& lines, std::optional<int> beam_size,
             std::optional<double> length_penalty, std::optional<int> max_decoding_length,
             const py::object& max_length_factor, std::optional<int> max_batch_size,
             std::optional<bool> placeholder_constraint) {
            nmt::TranslationOptions o = translation_options(beam_size, length_penalty, max_decoding_length,
                                                            max_length_factor, max_batch_size, placeholder_constraint);
            return interruptible([&](const std::atomic<bool>* cancel) {
              o.cancel = cancel;
              return t.translate_batch(lines, o);
            });
          },
          py::arg("lines"), py::kw_only(), py::arg("beam_size") = py::none(), py::arg("length_penalty") = py::none(),
          py::arg("max_decoding_length") = py::none(), py::arg("max_length_factor") = py::none(),
          py::arg("max_batch_size") = py::none(), py::arg("placeholder_constraint") = py::none(),
          "One TranslationResult per line, in order (an empty line gives an empty translation). beam_size: 0 "
          "greedy, K >= 2 beam search; length_penalty: GNMT's alpha; max_decoding_length: target pieces at most; "
          "max_length_factor: also stop after factor x source pieces + 5 (0 off, 'auto' from the training corpus); "
          "max_batch_size: sentences decoded together; placeholder_constraint: every placeholder of a line comes "
          "out as often as it goes in (a placeholder-protected model).")
      .def(
          "translate_file",
          [](const nmt::Translator& t, const py::object& source, const py::object& output,
             std::optional<int> beam_size, std::optional<double> length_penalty,
             std::optional<int> max_decoding_length, const py::object& max_length_factor,
             std::optional<int> max_batch_size, std::optional<bool> placeholder_constraint) {
            nmt::TranslationOptions o = translation_options(beam_size, length_penalty, max_decoding_length,
                                                            max_length_factor, max_batch_size, placeholder_constraint);
            const std::string in = fspath(source), out = fspath(output);
            return interruptible([&](const std::atomic<bool>* cancel) {
              o.cancel = cancel;
              return t.translate_file(in, out, o);
            });
          },
          py::arg("source"), py::arg("output"), py::kw_only(), py::arg("beam_size") = py::none(),
          py::arg("length_penalty") = py::none(), py::arg("max_decoding_length") = py::none(),
          py::arg("max_length_factor") = py::none(), py::arg("max_batch_size") = py::none(),
          py::arg("placeholder_constraint") = py::none(),
          "Every line of `source` (UTF-8, one sentence a line) translated into `output`, written whole or not at "
          "all; the options as translate_batch's. Returns TranslationStats.")
      .def(
          "score_batch",
          [](const nmt::Translator& t, const std::vector<std::string>& sources,
             const std::vector<std::string>& targets) {
            return interruptible([&](const std::atomic<bool>*) { return t.score_batch(sources, targets); });
          },
          py::arg("sources"), py::arg("targets"),
          "For each (source, target) pair, the log-probability of each target piece and of the end, given the "
          "source (teacher forcing).")
      .def_property_readonly("model_name", &nmt::Translator::model_name, "the checkpoint read, and its step")
      .def_property_readonly("description", &nmt::Translator::description, "how it runs")
      .def("__repr__", [](const nmt::Translator& t) { return "<nmt.Translator " + t.model_name() + ">"; });
}

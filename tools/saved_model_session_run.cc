// The C++ path tensorflow_model_server takes with a SavedModel, as a small program:
// tensorflow::LoadSavedModel (SavedModelBundle: MetaGraph import, the saver's restore op on variables/, the init
// op), then Session::Run on one SignatureDef's input and output tensor names.
//
//   saved_model_session_run <export_dir> <signature> <op_library_dir> <input>=<text> [<input>=<text> ...]
//
// Every *.so in <op_library_dir> (TF.Text's kernels: tensorflow_text/python/ops) is loaded first with
// Env::LoadDynamicLibrary, as the model server links them. Repeating an input name makes a batch: `text=a text=b`
// is text = ["a", "b"]. Inputs are [batch] strings (the raw-text signatures). Output, one line per output alias:
//   <alias> <dtype> <dim> <dim> ... : <value> <value> ...
// floats as %.9g, integers as is, strings as hex bytes (any byte may appear). Exit 1 with the status on failure.
// Built and run by tests/savedmodels/test_cpp_loader.py (a slow test): link with -Wl,--no-as-needed, or
// libtensorflow_cc's session factories are dropped and NewSession finds none.

#include <dirent.h>

#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "tensorflow/cc/saved_model/loader.h"
#include "tensorflow/cc/saved_model/constants.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/platform/env.h"

namespace {

int Fail(const std::string& what, const absl::Status& status) {
  std::fprintf(stderr, "%s: %s\n", what.c_str(), status.ToString().c_str());
  return 1;
}

void Print(const std::string& alias, const tensorflow::Tensor& t) {
  std::printf("%s %s", alias.c_str(), tensorflow::DataTypeString(t.dtype()).c_str());
  for (int d = 0; d < t.dims(); ++d) std::printf(" %lld", static_cast<long long>(t.dim_size(d)));
  std::printf(" :");
  const int64_t n = t.NumElements();
  for (int64_t i = 0; i < n; ++i) {
    switch (t.dtype()) {
      case tensorflow::DT_FLOAT: std::printf(" %.9g", t.flat<float>()(i)); break;
      case tensorflow::DT_INT32: std::printf(" %d", t.flat<int32_t>()(i)); break;
      case tensorflow::DT_INT64: std::printf(" %lld", static_cast<long long>(t.flat<int64_t>()(i))); break;
      case tensorflow::DT_STRING: {
        const tensorflow::tstring& s = t.flat<tensorflow::tstring>()(i);
        std::printf(" ");
        if (s.empty()) std::printf("-");
        for (unsigned char c : std::string(s)) std::printf("%02x", c);
      } break;
      default: std::printf(" ?");
    }
  }
  std::printf("\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: %s <export_dir> <signature> <op_library_dir> <input>=<text> ...\n", argv[0]);
    return 2;
  }
  const std::string export_dir = argv[1], signature_name = argv[2], op_dir = argv[3];

  DIR* dir = opendir(op_dir.c_str());
  if (dir == nullptr) return Fail("opening " + op_dir, absl::NotFoundError("no such folder"));
  for (dirent* entry = readdir(dir); entry != nullptr; entry = readdir(dir)) {
    const std::string name = entry->d_name;
    if (name.size() < 3 || name.compare(name.size() - 3, 3, ".so") != 0) continue;
    void* handle = nullptr;
    absl::Status status = tensorflow::Env::Default()->LoadDynamicLibrary((op_dir + "/" + name).c_str(), &handle);
    if (!status.ok()) return Fail("loading " + name, status);
  }
  closedir(dir);

  tensorflow::SavedModelBundle bundle;
  absl::Status status = tensorflow::LoadSavedModel(tensorflow::SessionOptions(), tensorflow::RunOptions(),
                                                   export_dir, {"serve"}   /* kSavedModelTagServe: tag_constants.h is not in the wheel */, &bundle);
  if (!status.ok()) return Fail("LoadSavedModel", status);
  const auto& signatures = bundle.meta_graph_def.signature_def();
  auto found = signatures.find(signature_name);
  if (found == signatures.end()) return Fail("signature", absl::NotFoundError(signature_name));
  const tensorflow::SignatureDef& signature = found->second;

  std::map<std::string, std::vector<std::string>> texts;
  for (int i = 4; i < argc; ++i) {
    const std::string arg = argv[i];
    const size_t eq = arg.find('=');
    if (eq == std::string::npos) return Fail("argument " + arg, absl::InvalidArgumentError("write NAME=TEXT"));
    texts[arg.substr(0, eq)].push_back(arg.substr(eq + 1));
  }
  std::vector<std::pair<std::string, tensorflow::Tensor>> feeds;
  for (const auto& [alias, values] : texts) {
    auto info = signature.inputs().find(alias);
    if (info == signature.inputs().end()) return Fail("input", absl::InvalidArgumentError(alias));
    tensorflow::Tensor t(tensorflow::DT_STRING, tensorflow::TensorShape({static_cast<int64_t>(values.size())}));
    for (size_t j = 0; j < values.size(); ++j) t.flat<tensorflow::tstring>()(j) = values[j];
    feeds.emplace_back(info->second.name(), t);
  }
  std::vector<std::string> aliases, names;
  for (const auto& [alias, info] : signature.outputs()) {
    aliases.push_back(alias);
    names.push_back(info.name());
  }
  std::vector<tensorflow::Tensor> outputs;
  status = bundle.session->Run(feeds, names, {}, &outputs);
  if (!status.ok()) return Fail("Session::Run", status);
  for (size_t i = 0; i < outputs.size(); ++i) Print(aliases[i], outputs[i]);
  return 0;
}

// The op catalog (see op_catalog.h).
#include "plugin/kernels/op_catalog.h"

#include <map>
#include <mutex>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace vgpu {
namespace {

struct CatalogEntry {
  std::set<std::string> dtypes;
  std::set<std::string> constraints;  // "T=float32,Tidx=int32" per registration
  std::set<std::string> host_memory;
  std::string data_formats;
  std::string notes;
};

struct Catalog {
  std::mutex mu;
  std::map<std::string, CatalogEntry> ops;
};

Catalog& TheCatalog() {
  static Catalog* catalog = new Catalog();
  return *catalog;
}

std::string TypeName(TF_DataType dtype) {
  switch (dtype) {
    case TF_FLOAT: return "float32";
    case TF_DOUBLE: return "float64";
    case TF_HALF: return "float16";
    case TF_BFLOAT16: return "bfloat16";
    case TF_INT32: return "int32";
    case TF_INT64: return "int64";
    case TF_UINT8: return "uint8";
    case TF_INT8: return "int8";
    case TF_BOOL: return "bool";
    case TF_RESOURCE: return "resource";
    case TF_VARIANT: return "variant";
    case TF_UINT32: return "uint32";
    case TF_UINT64: return "uint64";
    case TF_INT16: return "int16";
    case TF_UINT16: return "uint16";
    case TF_COMPLEX64: return "complex64";
    case TF_COMPLEX128: return "complex128";
    case TF_QINT8: return "qint8";
    default: return absl::StrCat("dtype", static_cast<int>(dtype));
  }
}

// A JSON string literal (the catalog's strings are ASCII without control characters, but
// quotes and backslashes are escaped all the same).
std::string Quote(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out.push_back('\\');
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out.push_back(c);
  }
  return out + "\"";
}

std::string QuoteList(const std::set<std::string>& values) {
  std::vector<std::string> quoted;
  for (const std::string& v : values) quoted.push_back(Quote(v));
  return absl::StrCat("[", absl::StrJoin(quoted, ", "), "]");
}

}  // namespace

void CatalogKernel(const char* op_name, absl::Span<const CatalogConstraint> constraints,
                   absl::Span<const char* const> host_memory) {
  Catalog& catalog = TheCatalog();
  std::lock_guard<std::mutex> lock(catalog.mu);
  CatalogEntry& entry = catalog.ops[op_name];
  std::vector<std::string> parts;
  for (const CatalogConstraint& c : constraints) {
    parts.push_back(absl::StrCat(c.attribute, "=", TypeName(c.dtype)));
    // The op's element type: the first constraint names it (T, dtype, ...).
    if (&c == &constraints.front()) entry.dtypes.insert(TypeName(c.dtype));
  }
  entry.constraints.insert(absl::StrJoin(parts, ","));
  for (const char* name : host_memory) entry.host_memory.insert(name);
}

void DocumentOp(const char* op_name, const char* data_formats, const char* notes) {
  Catalog& catalog = TheCatalog();
  std::lock_guard<std::mutex> lock(catalog.mu);
  CatalogEntry& entry = catalog.ops[op_name];
  entry.data_formats = data_formats;
  entry.notes = notes;
}

std::string OpCatalogJson() {
  Catalog& catalog = TheCatalog();
  std::lock_guard<std::mutex> lock(catalog.mu);
  std::vector<std::string> items;
  for (const auto& [op, entry] : catalog.ops) {
    if (entry.constraints.empty()) continue;  // documented but never registered
    items.push_back(absl::StrCat(
        "{\"op\": ", Quote(op), ", \"dtypes\": ", QuoteList(entry.dtypes),
        ", \"constraints\": ", QuoteList(entry.constraints),
        ", \"host_memory\": ", QuoteList(entry.host_memory),
        ", \"data_formats\": ", Quote(entry.data_formats), ", \"notes\": ", Quote(entry.notes),
        "}"));
  }
  return absl::StrCat("[", absl::StrJoin(items, ",\n "), "]");
}

}  // namespace vgpu

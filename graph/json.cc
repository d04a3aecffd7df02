#include "graph/json.h"

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

namespace loom {
namespace {

using nlohmann::json;

const char* kHiddenKeys[] = {"ctx_group", "lr_mult", "wd_mult", "force_mirroring",
                             "mirror_stage"};

bool starts_with(const std::string& s, const std::string& p) { return s.rfind(p, 0) == 0; }
bool has_suffix(const std::string& s, const std::string& p) {
  return s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0;
}

std::string json_value_to_string(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  return v.dump();
}

// A JSON value quoted in an error message: short, one level deep (dump() recurses, and a
// hostile file can nest arrays thousands deep or hold megabytes in one entry).
std::string brief(const json& v) {
  if (v.is_primitive()) {
    std::string s = v.dump();
    return s.size() > 40 ? s.substr(0, 40) + "..." : s;
  }
  if (v.is_object()) return "{...}";
  std::string s = "[";
  for (size_t k = 0; k < v.size() && k < 4; ++k)
    s += (k ? ", " : "") + (v[k].is_primitive() ? brief(v[k]) : v[k].is_array() ? "[...]" : "{...}");
  return s + (v.size() > 4 ? ", ...]" : "]");
}

struct RawNode {
  std::string op, name;
  Attrs attrs;
  std::vector<std::array<int64_t, 3>> inputs;
  std::vector<int64_t> control_deps;
};

class Loader {
 public:
  // Nodes hold their inputs by shared_ptr, so a cycle in the file (rejected by the check in
  // read_heads, or among nodes no head reaches) would keep itself alive: cut the edges of
  // every node the loaded symbol does not own.
  ~Loader() {
    for (const NodePtr& n : nodes_) {
      if (owned_.count(n.get())) continue;
      n->inputs.clear();
      n->control_deps.clear();
    }
  }
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  Loader(const std::string& text, std::string source) : src_(std::move(source)) {
    try {
      doc_ = json::parse(text);
    } catch (const json::parse_error& e) {
      throw JsonError(src_ + ": malformed JSON at byte " + std::to_string(e.byte) + ": " +
                      e.what());
    } catch (const json::exception& e) {  // out_of_range: a number such as 1e999
      throw JsonError(src_ + ": malformed JSON: " + e.what());
    }
  }

  Symbol load() {
    if (!doc_.is_object()) fail("top level is not a JSON object");
    for (const char* k : {"nodes", "arg_nodes", "heads"})
      if (!doc_.contains(k)) fail(std::string("missing required key '") + k + "'");
    if (!doc_["nodes"].is_array()) fail("'nodes' is not an array");
    version_ = 800;
    if (doc_.contains("attrs") && doc_["attrs"].is_object() &&
        doc_["attrs"].contains("mxnet_version")) {
      const json& v = doc_["attrs"]["mxnet_version"];
      if (v.is_array() && v.size() == 2 && v[1].is_number_integer()) version_ = v[1].get<int>();
      else if (v.is_number_integer()) version_ = v.get<int>();
    }
    read_nodes();
    build_nodes();
    return read_heads();
  }

 private:
  [[noreturn]] void fail(const std::string& msg) const { throw JsonError(src_ + ": " + msg); }

  // Every operator the graph names must be registered; one error names all that are not (each
  // with its first nodes), so a user sees the whole list of what to add at once.
  void check_ops_known() const {
    std::vector<std::string> names;
    std::map<std::string, std::vector<size_t>> where;
    for (size_t i = 0; i < raw_.size(); ++i) {
      if (raw_[i].op == "null" || find_op(raw_[i].op)) continue;
      if (!where.count(raw_[i].op)) names.push_back(raw_[i].op);
      where[raw_[i].op].push_back(i);
    }
    if (names.empty()) return;
    auto node = [&](size_t i) { return std::to_string(i) + " ('" + raw_[i].name + "')"; };
    if (names.size() == 1 && where[names[0]].size() == 1)
      throw UnknownOpError(src_ + ": unknown operator " + names[0] + " in node " + node(where[names[0]][0]));
    std::string msg = src_ + ": " + std::to_string(names.size()) + " unknown operator" +
                      (names.size() > 1 ? "s" : "") + ": ";
    for (size_t k = 0; k < names.size(); ++k) {
      const auto& nodes = where[names[k]];
      msg += (k ? "; " : "") + names[k] + " in node" + (nodes.size() > 1 ? "s " : " ");
      for (size_t j = 0; j < nodes.size() && j < 3; ++j) msg += (j ? ", " : "") + node(nodes[j]);
      if (nodes.size() > 3) msg += " and " + std::to_string(nodes.size() - 3) + " more";
    }
    throw UnknownOpError(msg);
  }
  std::string where(size_t i) const {
    return src_ + ": node " + std::to_string(i) +
           (i < raw_.size() && !raw_[i].name.empty() ? " ('" + raw_[i].name + "')" : "");
  }

  static void read_attr_map(const json& m, Attrs& out, bool overwrite) {
    if (!m.is_object()) return;
    for (auto it = m.begin(); it != m.end(); ++it) {
      if (!overwrite && out.count(it.key())) continue;
      out[it.key()] = json_value_to_string(it.value());
    }
  }

  void read_nodes() {
    const json& nodes = doc_["nodes"];
    for (size_t i = 0; i < nodes.size(); ++i) {
      const json& n = nodes[i];
      RawNode r;
      if (!n.is_object()) fail("node " + std::to_string(i) + " is not an object");
      if (n.contains("name") && n["name"].is_string()) r.name = n["name"].get<std::string>();
      raw_.push_back(r);
      RawNode& rn = raw_.back();
      if (!n.contains("op") || !n["op"].is_string()) throw JsonError(where(i) + ": missing 'op'");
      rn.op = n["op"].get<std::string>();
      if (n.contains("attrs")) read_attr_map(n["attrs"], rn.attrs, true);
      if (n.contains("attr")) read_attr_map(n["attr"], rn.attrs, true);
      if (n.contains("param")) read_attr_map(n["param"], rn.attrs, false);
      if (!n.contains("inputs") || !n["inputs"].is_array())
        throw JsonError(where(i) + ": missing 'inputs' array");
      for (const auto& e : n["inputs"]) {
        if (!e.is_array() || e.size() < 2 || e.size() > 3 || !e[0].is_number_integer() ||
            !e[1].is_number_integer())
          throw JsonError(where(i) + ": malformed input entry " + brief(e) +
                          " (expected [node, index] or [node, index, version])");
        int64_t ver = e.size() == 3 && e[2].is_number_integer() ? e[2].get<int64_t>() : 0;
        rn.inputs.push_back({e[0].get<int64_t>(), e[1].get<int64_t>(), ver});
      }
      if (n.contains("control_deps") && n["control_deps"].is_array())
        for (const auto& c : n["control_deps"]) {
          if (!c.is_number_integer())
            throw JsonError(where(i) + ": control dependency " + brief(c) + " is not a node index");
          rn.control_deps.push_back(c.get<int64_t>());
        }
    }
  }

  // MXNet's FixParsing upgrade for files older than the running version: hidden keys
  // written without underscores become __key__; "<input>_<key>" moves to that input.
  void fix_hidden_keys(size_t i, const std::vector<std::string>& in_names) {
    RawNode& r = raw_[i];
    Attrs keep;
    for (const auto& [k, v] : r.attrs) {
      if (starts_with(k, "__")) {
        keep[k] = v;
        continue;
      }
      bool moved = false;
      for (const char* h : kHiddenKeys) {
        std::string hk = h;
        if (k == hk) {
          keep["__" + hk + "__"] = v;
          moved = true;
        } else if (has_suffix(k, "_" + hk)) {
          std::string arg = k.substr(0, k.size() - hk.size() - 1);
          for (size_t j = 0; j < in_names.size() && j < r.inputs.size(); ++j) {
            int64_t src = r.inputs[j][0];
            if (in_names[j] == arg && src >= 0 && static_cast<size_t>(src) < raw_.size() &&
                raw_[static_cast<size_t>(src)].op == "null") {
              raw_[static_cast<size_t>(src)].attrs["__" + hk + "__"] = v;
              moved = true;
            }
          }
        }
        if (moved) break;
      }
      if (!moved) keep[k] = v;
    }
    r.attrs = std::move(keep);
  }

  void build_nodes() {
    size_t n = raw_.size();
    nodes_.resize(n);
    for (size_t i = 0; i < n; ++i) {
      auto node = std::make_shared<Node>();
      node->attrs.name = raw_[i].name;
      nodes_[i] = node;
    }
    // Resolve ops and parse attributes first (hidden-key fixing may touch input variables).
    std::vector<const OpDef*> ops(n, nullptr);
    check_ops_known();
    for (size_t i = 0; i < n; ++i) {
      if (raw_[i].op == "null") continue;
      const OpDef* op = find_op(raw_[i].op);
      ops[i] = op;
      if (version_ < kMxnetVersion) {
        OpAttrs probe = make_op_attrs(*op, raw_[i].name, raw_[i].attrs);
        fix_hidden_keys(i, op_inputs(probe));
      }
    }
    for (size_t i = 0; i < n; ++i) {
      Node& node = *nodes_[i];
      if (!ops[i]) {
        node.attrs.dict = raw_[i].attrs;
        if (!raw_[i].inputs.empty()) throw GraphError(where(i) + ": a variable cannot have inputs");
        continue;
      }
      node.attrs = make_op_attrs(*ops[i], raw_[i].name, raw_[i].attrs);
      for (size_t k = 0; k < raw_[i].inputs.size(); ++k) {
        const auto& e = raw_[i].inputs[k];
        if (e[0] < 0 || static_cast<size_t>(e[0]) >= n)
          throw GraphError(where(i) + ": input " + std::to_string(k) + " refers to node " +
                           std::to_string(e[0]) + ", but the file has " + std::to_string(n) +
                           " nodes");
        if (e[1] < 0 || e[1] > UINT32_MAX || e[2] < 0 || e[2] > UINT32_MAX)
          throw GraphError(where(i) + ": input " + std::to_string(k) + " has output index " +
                           std::to_string(e[1]) + " and version " + std::to_string(e[2]) +
                           " (expected 0..4294967295)");
        node.inputs.push_back({nodes_[static_cast<size_t>(e[0])], static_cast<uint32_t>(e[1]),
                               static_cast<uint32_t>(e[2])});
      }
      for (auto c : raw_[i].control_deps) {
        if (c < 0 || static_cast<size_t>(c) >= n)
          throw GraphError(where(i) + ": control dependency refers to node " + std::to_string(c));
        node.control_deps.push_back(nodes_[static_cast<size_t>(c)]);
      }
      auto in_names = op_inputs(node.attrs);
      // Files before 0.9 omit aux inputs (BatchNorm moving stats): synthesise them.
      if (node.inputs.size() < in_names.size()) {
        if (version_ >= 900)
          throw GraphError(where(i) + ": op " + ops[i]->name + " needs " +
                           std::to_string(in_names.size()) + " inputs, the file gives " +
                           std::to_string(node.inputs.size()));
        for (size_t k = node.inputs.size(); k < in_names.size(); ++k) {
          Attrs va = raw_[i].attrs;
          auto it = ops[i]->input_init.find(static_cast<int>(k));
          if (it != ops[i]->input_init.end()) va["__init__"] = it->second;
          node.inputs.push_back({Node::variable(node.name() + "_" + in_names[k], va), 0, 0});
        }
      } else if (node.inputs.size() > in_names.size()) {
        throw GraphError(where(i) + ": op " + ops[i]->name + " takes " +
                         std::to_string(in_names.size()) + " inputs, the file gives " +
                         std::to_string(node.inputs.size()));
      }
      // Files before 0.9.4 lack the op-specific __init__ of variable inputs.
      if (version_ < 904) {
        for (const auto& [pos, init] : ops[i]->input_init) {
          if (static_cast<size_t>(pos) >= node.inputs.size()) continue;
          Node& v = *node.inputs[static_cast<size_t>(pos)].node;
          if (v.is_variable() && !v.attrs.dict.count("__init__")) v.attrs.dict["__init__"] = init;
        }
      }
    }
    // arg_nodes must all be variables.
    const json& args = doc_["arg_nodes"];
    if (!args.is_array()) fail("'arg_nodes' is not an array");
    for (const auto& a : args) {
      if (!a.is_number_integer() || a.get<int64_t>() < 0 || a.get<size_t>() >= n)
        fail("arg_nodes entry " + brief(a) + " is not a node index");
      if (raw_[a.get<size_t>()].op != "null")
        fail("arg_nodes entry " + brief(a) + " ('" + raw_[a.get<size_t>()].name +
             "') is not a variable");
    }
  }

  Symbol read_heads() {
    const json& heads = doc_["heads"];
    if (!heads.is_array()) fail("'heads' is not an array");
    std::vector<NodeEntry> outs;
    for (const auto& h : heads) {
      if (!h.is_array() || h.size() < 2 || !h[0].is_number_integer() || !h[1].is_number_integer())
        fail("malformed head entry " + brief(h));
      int64_t id = h[0].get<int64_t>();
      if (id < 0 || static_cast<size_t>(id) >= nodes_.size())
        fail("head refers to node " + std::to_string(id) + ", but the file has " +
             std::to_string(nodes_.size()) + " nodes");
      const int64_t index = h[1].get<int64_t>();
      if (index < 0 || index > UINT32_MAX)
        fail("head refers to output " + std::to_string(index) + " of node " + std::to_string(id));
      outs.push_back({nodes_[static_cast<size_t>(id)], static_cast<uint32_t>(index), 0});
    }
    Symbol sym(std::move(outs));
    IndexedGraph check(sym.outputs());  // cycles and output-index errors
    for (uint32_t i = 0; i < check.num_nodes(); ++i) owned_.insert(check.node(i).node);
    return sym;
  }

  std::string src_;
  json doc_;
  int version_ = 800;
  std::vector<RawNode> raw_;
  std::vector<NodePtr> nodes_;
  std::set<const Node*> owned_;  // nodes reachable from the heads of a successful load
};

void write_string(std::ostringstream& os, const std::string& s) { os << json(s).dump(); }

}  // namespace

Symbol load_json(const std::string& text, const std::string& source) {
  Loader l(text, source);
  try {
    return l.load();
  } catch (const GraphError& e) {
    std::string m = e.what();
    if (m.rfind(source, 0) == 0) throw;
    throw GraphError(source + ": " + m);
  } catch (const ParamError& e) {
    throw ParamError(source + ": " + e.what());
  }
}

Symbol load_json_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error("cannot open '" + path + "'");
  std::stringstream ss;
  ss << f.rdbuf();
  return load_json(ss.str(), path);
}

std::string save_json(const Symbol& sym) {
  IndexedGraph g(sym.outputs());
  std::ostringstream os;
  os << "{\n  \"nodes\": [\n";
  for (uint32_t i = 0; i < g.num_nodes(); ++i) {
    const Node& n = *g.node(i).node;
    os << "    {\n      \"op\": ";
    write_string(os, n.is_variable() ? "null" : n.attrs.op->name);
    os << ", \n      \"name\": ";
    write_string(os, n.name());
    os << ", \n";
    if (!n.attrs.dict.empty()) {
      os << "      \"attrs\": {";
      bool first = true;
      for (const auto& [k, v] : n.attrs.dict) {
        os << (first ? "\n" : ", \n") << "        ";
        write_string(os, k);
        os << ": ";
        write_string(os, v);
        first = false;
      }
      os << "\n      }, \n";
    }
    os << "      \"inputs\": [";
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      const auto& e = n.inputs[k];
      os << (k ? ", " : "") << "[" << g.node_id(e.node.get()) << ", " << e.index << ", "
         << e.version << "]";
    }
    os << "]";
    if (!n.control_deps.empty()) {
      os << ", \n      \"control_deps\": [";
      for (size_t k = 0; k < n.control_deps.size(); ++k)
        os << (k ? ", " : "") << g.node_id(n.control_deps[k].get());
      os << "]";
    }
    os << "\n    }" << (i + 1 < g.num_nodes() ? ", " : "") << "\n";
  }
  os << "  ], \n  \"arg_nodes\": [";
  for (size_t k = 0; k < g.variables().size(); ++k) os << (k ? ", " : "") << g.variables()[k];
  os << "], \n  \"node_row_ptr\": [";
  for (size_t k = 0; k < g.row_ptr().size(); ++k) os << (k ? ", " : "") << g.row_ptr()[k];
  os << "], \n  \"heads\": [";
  for (size_t k = 0; k < sym.outputs().size(); ++k) {
    const auto& e = sym.outputs()[k];
    os << (k ? ", " : "") << "[" << g.node_id(e.node.get()) << ", " << e.index << ", 0]";
  }
  os << "], \n  \"attrs\": {\"mxnet_version\": [\"int\", " << kMxnetVersion << "]}\n}";
  return os.str();
}

}  // namespace loom

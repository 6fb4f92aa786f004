// The C++ compiler workload of bench/run (real-cxx): a file of ordinary template-heavy C++17 that
// clang++ -O2 compiles in about a second, not a program that is run. It instantiates the standard
// containers, <variant>, <functional> and a few class templates of its own over several
// types, so that the compiler's memory is its AST, its template instantiations and its optimizer.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <variant>
#include <vector>

namespace work {

struct Null {};
struct Value;
using Array = std::vector<Value>;
using Object = std::map<std::string, Value>;
struct Value {
	std::variant<Null, bool, double, std::string, Array, Object> v;
	Value() : v(Null{}) {}
	template <class T> Value(T x) : v(std::move(x)) {}
};

class Parser {
	const std::string &s;
	size_t i = 0;
	void ws() { while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) i++; }
	std::optional<std::string> str()
	{
		if (i >= s.size() || s[i] != '"') return std::nullopt;
		std::string out;
		for (i++; i < s.size() && s[i] != '"'; i++) out += s[i] == '\\' && i + 1 < s.size() ? s[++i] : s[i];
		i++;
		return out;
	}

      public:
	explicit Parser(const std::string &text) : s(text) {}
	std::optional<Value> value()
	{
		ws();
		if (i >= s.size()) return std::nullopt;
		if (s[i] == '{') {
			Object o;
			for (i++;;) {
				ws();
				if (i < s.size() && s[i] == '}') { i++; return Value(o); }
				auto k = str();
				ws();
				if (!k || i >= s.size() || s[i++] != ':') return std::nullopt;
				auto v = value();
				if (!v) return std::nullopt;
				o.emplace(*k, std::move(*v));
				ws();
				if (i < s.size() && s[i] == ',') i++;
			}
		}
		if (s[i] == '[') {
			Array a;
			for (i++;;) {
				ws();
				if (i < s.size() && s[i] == ']') { i++; return Value(a); }
				auto v = value();
				if (!v) return std::nullopt;
				a.push_back(std::move(*v));
				ws();
				if (i < s.size() && s[i] == ',') i++;
			}
		}
		if (s[i] == '"') { auto t = str(); return t ? std::optional<Value>(Value(*t)) : std::nullopt; }
		if (s.compare(i, 4, "true") == 0) { i += 4; return Value(true); }
		if (s.compare(i, 5, "false") == 0) { i += 5; return Value(false); }
		if (s.compare(i, 4, "null") == 0) { i += 4; return Value(); }
		size_t used = 0;
		double d = std::stod(s.substr(i), &used);
		i += used;
		return Value(d);
	}
};

template <class... F> struct overload : F... { using F::operator()...; };
template <class... F> overload(F...) -> overload<F...>;

inline std::string dump(const Value &x)
{
	return std::visit(overload{
				  [](const Null &) -> std::string { return "null"; },
				  [](bool b) -> std::string { return b ? "true" : "false"; },
				  [](double d) { return std::to_string(d); },
				  [](const std::string &s) { return "\"" + s + "\""; },
				  [](const Array &a) {
					  std::string o = "[";
					  for (auto &e : a) o += (o.size() > 1 ? "," : "") + dump(e);
					  return o + "]";
				  },
				  [](const Object &m) {
					  std::string o = "{";
					  for (auto &[k, e] : m) o += (o.size() > 1 ? ",\"" : "\"") + k + "\":" + dump(e);
					  return o + "}";
				  },
			  },
			  x.v);
}

template <class K, class V, class Hash = std::hash<K>> class Lru {
	size_t cap;
	std::list<std::pair<K, V>> order;
	std::unordered_map<K, typename std::list<std::pair<K, V>>::iterator, Hash> where;

      public:
	explicit Lru(size_t c) : cap(c) {}
	std::optional<V> get(const K &k)
	{
		auto it = where.find(k);
		if (it == where.end()) return std::nullopt;
		order.splice(order.begin(), order, it->second);
		return it->second->second;
	}
	void put(K k, V v)
	{
		if (auto it = where.find(k); it != where.end()) order.erase(it->second);
		order.emplace_front(k, std::move(v));
		where[order.front().first] = order.begin();
		if (order.size() > cap) { where.erase(order.back().first); order.pop_back(); }
	}
};

template <class N, class W> class Graph {
	std::map<N, std::vector<std::pair<N, W>>> adj;

      public:
	void edge(N a, N b, W w) { adj[a].push_back({b, w}); adj[b].push_back({a, w}); }
	std::map<N, W> dijkstra(N from) const
	{
		std::map<N, W> dist;
		std::set<std::pair<W, N>> q{{W{}, from}};
		dist[from] = W{};
		while (!q.empty()) {
			auto [d, n] = *q.begin();
			q.erase(q.begin());
			auto it = adj.find(n);
			if (it == adj.end()) continue;
			for (auto &[m, w] : it->second)
				if (!dist.count(m) || d + w < dist[m]) {
					q.erase({dist.count(m) ? dist[m] : W{}, m});
					dist[m] = d + w;
					q.insert({dist[m], m});
				}
		}
		return dist;
	}
};

struct Token { std::string kind, text; };

inline std::vector<Token> lex(const std::string &src)
{
	static const std::vector<std::string> ops = {"==", "!=", "<=", ">=", "&&", "||"};
	std::vector<Token> out;
	for (size_t i = 0; i < src.size();) {
		unsigned char c = static_cast<unsigned char>(src[i]);
		size_t j = i + 1;
		std::string kind = "op";
		if (std::isspace(c)) { i++; continue; }
		if (std::isdigit(c)) {
			kind = "number";
			while (j < src.size() && (std::isdigit(static_cast<unsigned char>(src[j])) || src[j] == '.' || src[j] == 'e')) j++;
		} else if (std::isalpha(c) || c == '_') {
			kind = "ident";
			while (j < src.size() && (std::isalnum(static_cast<unsigned char>(src[j])) || src[j] == '_')) j++;
		} else if (c == '"') {
			kind = "string";
			while (j < src.size() && src[j] != '"') j += src[j] == '\\' ? 2 : 1;
			j = std::min(j + 1, src.size());
		} else if (std::find(ops.begin(), ops.end(), src.substr(i, 2)) != ops.end())
			j = i + 2;
		out.push_back({kind, src.substr(i, j - i)});
		i = j;
	}
	return out;
}

template <class T> struct Stats {
	std::vector<T> xs;
	void add(T x) { xs.push_back(x); }
	T sum() const { return std::accumulate(xs.begin(), xs.end(), T{}); }
	double mean() const { return xs.empty() ? 0 : static_cast<double>(sum()) / xs.size(); }
	T median()
	{
		if (xs.empty()) return T{};
		std::nth_element(xs.begin(), xs.begin() + xs.size() / 2, xs.end());
		return xs[xs.size() / 2];
	}
	std::map<T, size_t> histogram() const
	{
		std::map<T, size_t> h;
		for (auto &x : xs) h[x]++;
		return h;
	}
};

class Registry {
	std::unordered_map<std::string, std::function<std::string(const std::vector<std::string> &)>> fns;

      public:
	Registry()
	{
		fns["join"] = [](const std::vector<std::string> &a) {
			return std::accumulate(a.begin(), a.end(), std::string(), [](std::string x, const std::string &y) {
				return x.empty() ? y : x + "," + y;
			});
		};
		fns["sort"] = [](std::vector<std::string> a) {
			std::sort(a.begin(), a.end());
			std::string o;
			for (auto &s : a) o += s + ' ';
			return o;
		};
		fns["count"] = [](const std::vector<std::string> &a) { return std::to_string(a.size()); };
		fns["longest"] = [](const std::vector<std::string> &a) {
			auto it = std::max_element(a.begin(), a.end(),
						   [](auto &x, auto &y) { return x.size() < y.size(); });
			return it == a.end() ? std::string() : *it;
		};
	}
	std::optional<std::string> call(const std::string &name, const std::vector<std::string> &args) const
	{
		auto it = fns.find(name);
		if (it == fns.end()) return std::nullopt;
		return it->second(args);
	}
};

} // namespace work

int main(int argc, char **argv)
{
	using namespace work;
	std::string text = argc > 1 ? argv[1] : R"({"a": [1, 2, 3.5], "b": {"c": "d", "e": true}, "f": null})";
	if (auto v = Parser(text).value()) std::printf("%s\n", dump(*v).c_str());
	Lru<std::string, int> lru(2);
	lru.put("x", 1);
	lru.put("y", 2);
	lru.put("z", 3);
	std::printf("%d %d\n", lru.get("x").value_or(-1), lru.get("z").value_or(-1));
	Graph<std::string, double> g;
	g.edge("a", "b", 1.5);
	g.edge("b", "c", 2.5);
	g.edge("a", "c", 5);
	for (auto &[n, d] : g.dijkstra("a")) std::printf("%s=%g ", n.c_str(), d);
	std::printf("\n");
	for (auto &t : lex("if (x1 >= 42.5e3 && y != \"s\\\"q\") { z = x1 % 7; }"))
		std::printf("%s:%s ", t.kind.c_str(), t.text.c_str());
	Stats<int> si;
	for (int i = 0; i < 100; i++) si.add(i * 7 % 13);
	std::printf("%d %g %d %zu\n", si.median(), si.mean(), si.sum(), si.histogram().size());
	Registry r;
	std::vector<std::string> words{"pear", "fig", "banana", "kiwi"};
	for (auto name : {"join", "sort", "count", "longest", "none"})
		std::printf("%s\n", r.call(name, words).value_or("?").c_str());
	return 0;
}

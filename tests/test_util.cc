#include "test_util.h"

#include <fstream>
#include <sstream>

// The suite reads its expected errors with tg_last_error(): record them silently
// instead of printing each one (the library's default, TG_ERRORS=warn). A test of the
// printing sets its mode itself; TG_ERRORS=warn|abort|exit in the environment still
// wins, to watch a test's errors. (Linked into every test: test_util is alwayslink.)
static const bool errors_silenced = [] {
    if (!std::getenv("TG_ERRORS")) tg_set_error_mode(TG_ERRORS_SILENT);
    return true;
}();

std::map<std::string, FixtureTensor> load_fixtures(const std::string &path) {
    std::map<std::string, FixtureTensor> out;
    std::ifstream in(path);
    if (!in) {
        ADD_FAILURE() << "cannot open fixture file " << path;
        return out;
    }
    std::string line;
    while (std::getline(in, line)) {
        if (line.rfind("tensor ", 0) != 0) continue;
        std::istringstream head(line.substr(7));
        std::string name;
        FixtureTensor t;
        int ndim = 0;
        head >> name >> t.dtype >> ndim;
        int64_t numel = 1;
        for (int i = 0; i < ndim; i++) {
            int64_t d;
            head >> d;
            t.shape.push_back(d);
            numel *= d;
        }
        std::getline(in, line);
        std::istringstream body(line);
        t.data.resize((size_t)numel);
        for (int64_t i = 0; i < numel; i++) {
            std::string tok;
            body >> tok;
            t.data[(size_t)i] = tok == "nan"    ? NAN
                                : tok == "inf"  ? INFINITY
                                : tok == "-inf" ? -INFINITY
                                                : std::stod(tok);
        }
        out[name] = t;
    }
    return out;
}

const FixtureTensor &fixture_tensor(const std::map<std::string, FixtureTensor> &fixtures, const std::string &name) {
    static const FixtureTensor empty;
    auto it = fixtures.find(name);
    if (it == fixtures.end()) {
        ADD_FAILURE() << "no fixture tensor " << name;
        return empty;
    }
    return it->second;
}

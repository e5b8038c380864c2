// The mnemo subcommands; each takes argv from its own name on and returns
// the exit status.
#pragma once

namespace cli {

int cmd_info(int argc, char** argv);
int cmd_gen(int argc, char** argv);
int cmd_build(int argc, char** argv);
int cmd_search(int argc, char** argv);
int cmd_eval(int argc, char** argv);
int cmd_bench(int argc, char** argv);

}  // namespace cli

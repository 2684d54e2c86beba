#pragma once
// What each simulated client process does: the real primitives, used as an
// application would (acquire, hold, extend, release; a keeper loop; enter
// and take), reporting to the checker what the library told it.

namespace edgelock {
namespace sim {

class World;

/// A client process's main(), run on its fiber.
void client_main(World& w, int client);

}  // namespace sim
}  // namespace edgelock

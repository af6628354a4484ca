// The TCP rendezvous: a length-prefixed blob from rank 0 to each connecting rank.
#include "runtime/parallel/Rendezvous.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <thread>

namespace mt {

namespace {

int variable(const char *name, int fallback) {
  const char *text = std::getenv(name);
  if (!text || !*text)
    return fallback;
  char *end = nullptr;
  long value = std::strtol(text, &end, 10);
  if (*end != '\0' || value < 0)
    throw std::runtime_error(std::string(name) + " must be a non-negative integer, got '" +
                             text + "'");
  return static_cast<int>(value);
}

[[noreturn]] void fail(const std::string &what, const LaunchEnvironment &environment) {
  throw std::runtime_error("rendezvous at " + environment.address + ":" +
                           std::to_string(environment.port) + ": " + what + ": " +
                           std::strerror(errno));
}

void sendAll(int socket, const char *data, size_t bytes, const LaunchEnvironment &environment) {
  while (bytes > 0) {
    ssize_t sent = send(socket, data, bytes, MSG_NOSIGNAL);
    if (sent <= 0)
      fail("send", environment);
    data += sent;
    bytes -= static_cast<size_t>(sent);
  }
}

void receiveAll(int socket, char *data, size_t bytes, const LaunchEnvironment &environment) {
  while (bytes > 0) {
    ssize_t got = recv(socket, data, bytes, 0);
    if (got <= 0)
      fail("receive (rank 0 closed the connection)", environment);
    data += got;
    bytes -= static_cast<size_t>(got);
  }
}

sockaddr_in addressOf(const LaunchEnvironment &environment) {
  addrinfo hints{}, *found = nullptr;
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  if (getaddrinfo(environment.address.c_str(), nullptr, &hints, &found) != 0 || !found)
    throw std::runtime_error("rendezvous: cannot resolve MASTER_ADDR '" + environment.address +
                             "'");
  sockaddr_in address = *reinterpret_cast<sockaddr_in *>(found->ai_addr);
  freeaddrinfo(found);
  address.sin_port = htons(static_cast<uint16_t>(environment.port));
  return address;
}

} // namespace

LaunchEnvironment launchEnvironment() {
  LaunchEnvironment environment;
  bool mpi = std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr;
  environment.worldSize = variable(mpi ? "OMPI_COMM_WORLD_SIZE" : "WORLD_SIZE", 1);
  environment.rank = variable(mpi ? "OMPI_COMM_WORLD_RANK" : "RANK", 0);
  environment.localRank =
      variable(mpi ? "OMPI_COMM_WORLD_LOCAL_RANK" : "LOCAL_RANK", environment.rank);
  if (const char *address = std::getenv("MASTER_ADDR"); address && *address)
    environment.address = address;
  environment.port = variable("MASTER_PORT", environment.port);
  if (environment.worldSize < 1 || environment.rank >= environment.worldSize)
    throw std::runtime_error("rank " + std::to_string(environment.rank) +
                             " is outside a world of " + std::to_string(environment.worldSize));
  return environment;
}

std::vector<char> shareFromRankZero(const LaunchEnvironment &environment,
                                    std::vector<char> bytes, int timeoutSeconds) {
  if (environment.worldSize == 1)
    return bytes;
  sockaddr_in address = addressOf(environment);
  if (environment.rank == 0) {
    int listener = socket(AF_INET, SOCK_STREAM, 0);
    int yes = 1;
    setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    address.sin_addr.s_addr = htonl(INADDR_ANY);
    if (listener < 0 || bind(listener, reinterpret_cast<sockaddr *>(&address), sizeof address) ||
        listen(listener, environment.worldSize))
      fail("listen", environment);
    uint64_t length = bytes.size();
    for (int served = 1; served < environment.worldSize; ++served) {
      int peer = accept(listener, nullptr, nullptr);
      if (peer < 0)
        fail("accept", environment);
      sendAll(peer, reinterpret_cast<const char *>(&length), sizeof length, environment);
      sendAll(peer, bytes.data(), bytes.size(), environment);
      close(peer);
    }
    close(listener);
    return bytes;
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeoutSeconds);
  while (true) {
    int peer = socket(AF_INET, SOCK_STREAM, 0);
    if (peer < 0)
      fail("socket", environment);
    if (connect(peer, reinterpret_cast<sockaddr *>(&address), sizeof address) == 0) {
      uint64_t length = 0;
      receiveAll(peer, reinterpret_cast<char *>(&length), sizeof length, environment);
      std::vector<char> received(length);
      receiveAll(peer, received.data(), received.size(), environment);
      close(peer);
      return received;
    }
    close(peer);
    if (std::chrono::steady_clock::now() > deadline)
      fail("no rank 0 after " + std::to_string(timeoutSeconds) + " s", environment);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

} // namespace mt

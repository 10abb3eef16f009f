// SPDX-License-Identifier: Apache-2.0
// Streams and events, as in CuPy's tutorial: work on two streams with one waiting on an event of the
// other, the time between two events, and a graph captured once and replayed.
#include <fusion/fusion.hpp>

#include <cstdio>

namespace fz = fusion;

int main() {
  if (fz::device_count() == 0) {
    std::printf("This example needs a GPU: %s\n", fz::no_device_reason().c_str());
    return 0;
  }
  const std::int64_t n = 1 << 24;
  fz::Stream producer(fz::StreamOptions{.non_blocking = true});
  fz::Stream consumer(fz::StreamOptions{.non_blocking = true});

  fz::Array<float> a, b;
  fz::Event start, made;
  auto produce = [&] {
    a = fz::arange<float>(static_cast<double>(n));
    a = fz::sqrt(a) * 2.f;
  };
  {
    fz::StreamScope on(producer);  // like `with producer:` in CuPy
    produce();                     // once untimed: the kernels compile (or load) here
    producer.synchronize();
    start.record();
    produce();
    made = producer.record();
  }
  consumer.wait_event(made);  // the consumer starts only after the producer's event
  {
    fz::StreamScope on(consumer);
    b = a * a / 4.f;
    std::printf("b[9] = %.1f (expected 9.0)\n", b.slice({{9, 10}}).item());
  }
  std::printf("producer work took %.3f ms\n", fz::elapsed_time(start, made));

  // A graph: capture two assignments once, replay them cheaply.
  fz::Stream s(fz::StreamOptions{.non_blocking = true});
  fz::StreamScope on(s);
  fz::Array<float> x = fz::zeros<float>({n}), y = fz::zeros<float>({n});
  y = x + 1.f;  // compile before capturing
  x = y * 2.f;
  x = fz::zeros<float>({n});
  s.synchronize();
  s.begin_capture();
  y = x + 1.f;
  x = y * 2.f;
  fz::Graph g = s.end_capture();
  fz::Event g0, g1;
  g0.record(s);
  for (int i = 0; i < 10; ++i) g.launch(s);
  g1.record(s);
  g1.synchronize();
  std::printf("10 graph replays: %.3f ms; x[0] = %.0f (expected 2046)\n", fz::elapsed_time(g0, g1),
              x.slice({{0, 1}}).item());
  return 0;
}

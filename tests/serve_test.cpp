// The service's parts without HTTP (serve/): the batching policy with a fake
// runner and fake continuous-batching streams, request validation, the metrics text.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

#include "serve/access.h"
#include "serve/batcher.h"
#include "serve/metrics.h"
#include "serve/request.h"
#include "util/errors.h"

namespace nmt::serve {
namespace {

Job job(std::vector<std::string> lines, int64_t tokens_each, int64_t beam = 0) {
  Job j;
  j.lines = std::move(lines);
  j.tokens.assign(j.lines.size(), tokens_each);
  j.beam = beam;
  return j;
}

// Waits until `done` holds, polling; fails the test after 10 s instead of hanging.
void wait_for(const std::function<bool()>& done) {
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (!done() && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_TRUE(done()) << "timed out";
}

// Records every batch; answers line -> "T(line)". An optional gate holds the
// first batch until released, so that tests can fill the queue behind it.
struct FakeRunner {
  std::mutex mutex;
  std::vector<std::vector<std::string>> batches;  // lines of each batch, in order
  std::atomic<bool> hold{false};
  std::atomic<int> running{0};
  std::vector<Sentences> operator()(const std::vector<const Job*>& jobs) {
    ++running;
    while (hold) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    std::vector<Sentences> out;
    std::vector<std::string> lines;
    for (const Job* j : jobs) {
      Sentences r;
      for (const auto& l : j->lines) r.push_back({"T(" + l + ")", ""}), lines.push_back(l);
      out.push_back(std::move(r));
    }
    std::lock_guard<std::mutex> lock(mutex);
    batches.push_back(lines);
    return out;
  }
};

// Occupies the batcher's worker with a held batch of "0", so that what is
// submitted next waits in the queue until fake.hold is cleared.
std::future<JobResult> hold_worker(Batcher& b, FakeRunner& fake) {
  fake.hold = true;
  auto held = b.submit(job({"0"}, 1));
  wait_for([&] { return fake.running > 0; });
  return held;
}

BatchPolicy no_delay() {
  BatchPolicy policy;
  policy.max_delay_ms = 0;
  return policy;
}

TEST(Batcher, ConcurrentRequestsShareABatchAndGetTheirOwnAnswers) {
  FakeRunner fake;
  Batcher b(no_delay(), [&](const auto& jobs) { return fake(jobs); });
  auto first = hold_worker(b, fake);
  auto x = b.submit(job({"b", "c"}, 5));
  auto y = b.submit(job({"d"}, 5));
  EXPECT_EQ(b.queued(), 3);
  fake.hold = false;
  EXPECT_EQ(first.get().sentences[0].translation, "T(0)");
  const Sentences rx = x.get().sentences, ry = y.get().sentences;
  ASSERT_EQ(rx.size(), 2u);
  EXPECT_EQ(rx[0].translation, "T(b)");
  EXPECT_EQ(rx[1].translation, "T(c)");
  EXPECT_EQ(ry[0].translation, "T(d)");
  ASSERT_EQ(fake.batches.size(), 2u);  // the two waiting requests went together
  EXPECT_EQ(fake.batches[1], (std::vector<std::string>{"b", "c", "d"}));
  EXPECT_EQ(b.queued(), 0);
}

TEST(Batcher, TokenBudgetSplitsBatchesInArrivalOrder) {
  FakeRunner fake;
  BatchPolicy policy = no_delay();
  policy.max_batch_tokens = 20;
  Batcher b(policy, [&](const auto& jobs) { return fake(jobs); });
  auto held = hold_worker(b, fake);
  std::vector<std::future<JobResult>> f;
  for (const char* l : {"a", "b", "c", "d", "e"}) f.push_back(b.submit(job({l}, 8)));  // 8 tokens each
  auto big = b.submit(job({"big"}, 50));  // over the budget: alone
  fake.hold = false;
  for (auto& x : f) x.get();
  big.get();
  ASSERT_EQ(fake.batches.size(), 5u);
  EXPECT_EQ(fake.batches[1], (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(fake.batches[2], (std::vector<std::string>{"c", "d"}));
  EXPECT_EQ(fake.batches[3], (std::vector<std::string>{"e"}));
  EXPECT_EQ(fake.batches[4], (std::vector<std::string>{"big"}));
}

TEST(Batcher, DifferentBeamsAreNotMixed) {
  FakeRunner fake;
  Batcher b(no_delay(), [&](const auto& jobs) { return fake(jobs); });
  auto held = hold_worker(b, fake);
  auto g1 = b.submit(job({"g1"}, 1, 0));
  auto b4 = b.submit(job({"b4"}, 1, 4));
  auto g2 = b.submit(job({"g2"}, 1, 0));
  fake.hold = false;
  g1.get(), b4.get(), g2.get();
  ASSERT_EQ(fake.batches.size(), 3u);
  EXPECT_EQ(fake.batches[1], (std::vector<std::string>{"g1", "g2"}));
  EXPECT_EQ(fake.batches[2], (std::vector<std::string>{"b4"}));
}

TEST(Batcher, WaitsForCompanyUpToTheDelay) {
  FakeRunner fake;
  BatchPolicy policy;
  policy.max_batch_tokens = 1000;
  // y comes 50 ms after x, far inside the delay (a margin no loaded machine
  // eats up); x waits for the company the whole delay.
  policy.max_delay_ms = 1000;
  Batcher b(policy, [&](const auto& jobs) { return fake(jobs); });
  const auto start = Clock::now();
  auto x = b.submit(job({"x"}, 1));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  auto y = b.submit(job({"y"}, 1));
  const JobResult rx = x.get();
  y.get();
  EXPECT_GE(Clock::now() - start, std::chrono::milliseconds(950));
  EXPECT_GE(rx.queue_seconds, 0.95);  // it waited for company
  ASSERT_EQ(fake.batches.size(), 1u);
  EXPECT_EQ(fake.batches[0], (std::vector<std::string>{"x", "y"}));
}

TEST(Batcher, FullQueueRefusesAndStopFinishesWhatWasQueued) {
  FakeRunner fake;
  BatchPolicy policy = no_delay();
  policy.max_queue = 3;
  auto b = std::make_unique<Batcher>(policy, [&](const auto& jobs) { return fake(jobs); });
  auto held = hold_worker(*b, fake);
  auto a = b->submit(job({"a", "b"}, 1));
  auto c = b->submit(job({"c"}, 1));
  EXPECT_TRUE(a.valid());
  EXPECT_TRUE(c.valid());
  EXPECT_FALSE(b->submit(job({"d"}, 1)).valid());  // 3 waiting: full
  std::thread stopper([&] { b->stop(); });
  // stop() waits for the held batch; once it has begun, new work is refused.
  wait_for([&] { return b->stopping(); });
  EXPECT_FALSE(b->submit(job({"e"}, 1)).valid());  // stopping: refused
  fake.hold = false;
  stopper.join();
  EXPECT_EQ(a.get().sentences[1].translation, "T(b)");  // queued before stop: answered
  EXPECT_EQ(c.get().sentences[0].translation, "T(c)");
}

TEST(Batcher, WorkersTranslateBatchesSideBySide) {
  FakeRunner fake;
  BatchPolicy policy = no_delay();
  policy.workers = 2;
  Batcher b(policy, [&](const auto& jobs) { return fake(jobs); });
  auto first = hold_worker(b, fake);
  auto second = b.submit(job({"1"}, 1));  // the other worker takes it while the first is held
  wait_for([&] { return fake.running == 2; });
  fake.hold = false;
  EXPECT_EQ(second.get().sentences[0].translation, "T(1)");
  EXPECT_EQ(first.get().sentences[0].translation, "T(0)");
}

TEST(Batcher, ARunnerFailureFailsItsBatchOnly) {
  std::atomic<int> calls{0};
  Batcher b(no_delay(), [&](const std::vector<const Job*>& jobs) -> std::vector<Sentences> {
    if (calls++ == 0) throw std::runtime_error("boom");
    return {Sentences{{"ok", ""}}};
  });
  auto bad = b.submit(job({"x"}, 1));
  EXPECT_THROW(bad.get(), std::runtime_error);
  EXPECT_EQ(b.submit(job({"y"}, 1)).get().sentences[0].translation, "ok");
}

// A stream where a line of t tokens takes t steps (1 ms each) and
// translates to "S(line)". Shared by every worker's stream: a log of what
// joined and ended, and the most source tokens any step ran with.
struct FakeStreams {
  std::mutex mutex;
  std::vector<std::string> log;  // "+line" when a job's line joined, "-line" when it ended
  int64_t max_tokens = 0;
  std::vector<int64_t> adds;  // jobs per FakeStream::add call
  std::atomic<int64_t> steps{0};
  std::atomic<int64_t> releases{0};
  // While hold is set, a step waits (held says one is waiting): jobs
  // submitted meanwhile are all queued when the step ends.
  std::atomic<bool> hold{false}, held{false};
  void record(const std::string& event) {
    std::lock_guard<std::mutex> lock(mutex);
    log.push_back(event);
  }
  std::vector<std::string> events() {
    std::lock_guard<std::mutex> lock(mutex);
    return log;
  }
};

class FakeStream : public StepStream {
 public:
  explicit FakeStream(FakeStreams& shared) : shared_(shared) {}
  // The service's loop (runtime::run_search) in miniature: join, step, answer.
  void run(JobQueue& queue) override {
    for (;;) {
      const auto jobs = queue.take(*this, !rows_.empty(), source_tokens());
      if (!jobs) return;
      queue.start(*jobs, [&](const JobQueue::Tickets& t) { add(t); });
      if (rows_.empty()) continue;
      for (auto& [ticket, sentences] : step()) queue.answer(ticket, std::move(sentences));
    }
  }
  void add(const std::vector<std::pair<const Job*, uint64_t>>& jobs) {
    {
      std::lock_guard<std::mutex> lock(shared_.mutex);
      shared_.adds.push_back(static_cast<int64_t>(jobs.size()));
    }
    for (const auto& [job, ticket] : jobs)
      for (const std::string& line : job->lines)
        if (line == "bad") throw std::runtime_error("cannot start 'bad'");
    for (const auto& [job, ticket] : jobs) {
      for (size_t i = 0; i < job->lines.size(); ++i) {
        rows_.push_back({ticket, i, job->tokens[i], job->tokens[i], job->lines[i]});
        shared_.record("+" + job->lines[i]);
      }
      jobs_[ticket] = {Sentences(job->lines.size()), job->lines.size()};
    }
  }
  std::vector<std::pair<uint64_t, Sentences>> step() {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    while (shared_.hold) {
      shared_.held = true;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    shared_.held = false;
    ++shared_.steps;
    {
      std::lock_guard<std::mutex> lock(shared_.mutex);
      shared_.max_tokens = std::max(shared_.max_tokens, source_tokens());
    }
    std::vector<std::pair<uint64_t, Sentences>> done;
    for (auto it = rows_.begin(); it != rows_.end();) {
      if (--it->left > 0) {
        ++it;
        continue;
      }
      shared_.record("-" + it->line);
      auto& j = jobs_[it->ticket];
      j.first[it->index].translation = "S(" + it->line + ")";
      if (--j.second == 0) {
        done.emplace_back(it->ticket, std::move(j.first));
        jobs_.erase(it->ticket);
      }
      it = rows_.erase(it);
    }
    return done;
  }
  int64_t source_tokens() const {
    int64_t n = 0;
    for (const Row& r : rows_) n += r.tokens;
    return n;
  }
  void release() override {
    ++shared_.releases;
    shared_.record(jobs_.empty() ? "release" : "release while running");
  }

 private:
  struct Row {
    uint64_t ticket;
    size_t index;
    int64_t tokens, left;
    std::string line;
  };
  FakeStreams& shared_;
  std::vector<Row> rows_;
  std::map<uint64_t, std::pair<Sentences, size_t>> jobs_;
};

StreamFactory fake_streams(FakeStreams& shared) {
  return [&shared] { return std::make_unique<FakeStream>(shared); };
}

// A worker whose stream has been idle for idle_release_ms releases the
// stream's memory, once per idle spell, never while a job runs in it.
TEST(Batcher, AnIdleStreamReleasesItsMemory) {
  FakeRunner fake;
  FakeStreams streams;
  BatchPolicy policy = no_delay();
  policy.idle_release_ms = 50;
  Batcher b(policy, [&](const auto& jobs) { return fake(jobs); }, fake_streams(streams));
  EXPECT_EQ(b.submit(job({"long"}, 150)).get().sentences[0].translation, "S(long)");  // 150 steps of 1 ms
  wait_for([&] { return streams.releases >= 1; });
  EXPECT_EQ(b.submit(job({"again"}, 3)).get().sentences[0].translation, "S(again)");
  wait_for([&] { return streams.releases >= 2; });
  // Four more idle spells' worth of time in which nothing may happen (an
  // absence has no event to wait for): a worker that released on every
  // idle wake-up would release again here.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const std::vector<std::string> log = streams.events();
  EXPECT_EQ(std::count(log.begin(), log.end(), "release while running"), 0);
  EXPECT_EQ(streams.releases, 2) << "one release per idle spell";
  // Each release came after the job before it had ended.
  const auto at = [&](const std::string& e) { return std::find(log.begin(), log.end(), e) - log.begin(); };
  EXPECT_LT(at("-long"), at("release"));
}

TEST(Batcher, ShortGreedyJobsJoinARunningStreamAndLeaveBeforeLongOnes) {
  FakeRunner fake;
  FakeStreams streams;
  Batcher b(no_delay(), [&](const auto& jobs) { return fake(jobs); }, fake_streams(streams));
  auto long_job = b.submit(job({"long"}, 400));
  wait_for([&] { return streams.steps > 5; });
  auto short_job = b.submit(job({"short", "pair"}, 3));
  EXPECT_EQ(short_job.get().sentences[1].translation, "S(pair)");
  EXPECT_EQ(long_job.wait_for(std::chrono::seconds(0)), std::future_status::timeout)
      << "the short job waited for the long one";
  EXPECT_EQ(long_job.get().sentences[0].translation, "S(long)");
  EXPECT_TRUE(fake.batches.empty());  // greedy jobs never go to the batch runner
}

// A lone request bound for a stream does not wait out the delay, greedy or
// beam: later ones join it between steps anyway.
TEST(Batcher, ALoneJobOfAnyBeamStartsAtOnce) {
  FakeRunner fake;
  FakeStreams streams;
  BatchPolicy policy;
  policy.max_delay_ms = 1000;
  Batcher b(policy, [&](const auto& jobs) { return fake(jobs); }, fake_streams(streams));
  const JobResult greedy = b.submit(job({"alone"}, 2)).get();
  EXPECT_LT(greedy.queue_seconds, 0.5) << "a lone greedy job waited for company";
  EXPECT_EQ(greedy.sentences[0].translation, "S(alone)");
  const JobResult beam = b.submit(job({"beam"}, 2, 4)).get();
  EXPECT_LT(beam.queue_seconds, 0.5) << "a lone beam job waited for company";
  EXPECT_EQ(beam.sentences[0].translation, "S(beam)");
  EXPECT_TRUE(fake.batches.empty());
}

TEST(Batcher, NewcomersJoinOnlyWithinTheTokenBudget) {
  FakeRunner fake;
  FakeStreams streams;
  BatchPolicy policy = no_delay();
  policy.max_batch_tokens = 10;
  Batcher b(policy, [&](const auto& jobs) { return fake(jobs); }, fake_streams(streams));
  std::vector<std::future<JobResult>> results;
  for (int i = 0; i < 12; ++i) results.push_back(b.submit(job({std::to_string(i)}, 4)));
  for (int i = 0; i < 12; ++i) EXPECT_EQ(results[i].get().sentences[0].translation, "S(" + std::to_string(i) + ")");
  EXPECT_EQ(streams.max_tokens, 8);  // two 4-token jobs fit in 10, a third does not
}

// Beam jobs join the running stream like greedy ones (the stream runs
// sentences of every beam width side by side), in arrival order.
TEST(Batcher, ABeamJobJoinsTheRunningStream) {
  FakeRunner fake;
  FakeStreams streams;
  Batcher b(no_delay(), [&](const auto& jobs) { return fake(jobs); }, fake_streams(streams));
  auto running = b.submit(job({"running"}, 100));
  wait_for([&] { return streams.steps > 0; });
  auto beam = b.submit(job({"beam"}, 2, 4));
  auto later = b.submit(job({"later"}, 2));
  EXPECT_EQ(beam.get().sentences[0].translation, "S(beam)");
  EXPECT_EQ(later.get().sentences[0].translation, "S(later)");
  EXPECT_EQ(running.get().sentences[0].translation, "S(running)");
  const std::vector<std::string> log = streams.events();
  const auto at = [&](const std::string& e) { return std::find(log.begin(), log.end(), e) - log.begin(); };
  EXPECT_LT(at("+beam"), at("-running")) << "the beam job waited for the stream to drain";
  EXPECT_LT(at("+beam"), at("+later"));
  EXPECT_TRUE(fake.batches.empty()) << "a beam job went to the batch runner";
}

// Jobs that queued during a step join the stream together, in one add (one
// encoder pass); if that add fails, they are started one at a time and only
// the job that cannot start fails.
TEST(Batcher, NewcomersBetweenTwoStepsStartInOneAddAndFailAlone) {
  FakeRunner fake;
  FakeStreams streams;
  Batcher b(no_delay(), [&](const auto& jobs) { return fake(jobs); }, fake_streams(streams));
  auto running = b.submit(job({"running"}, 600));
  wait_for([&] { return streams.steps > 0; });
  streams.hold = true;
  wait_for([&] { return streams.held.load(); });
  std::vector<std::future<JobResult>> together;
  for (const char* line : {"a", "b", "c"}) together.push_back(b.submit(job({line}, 2)));
  streams.hold = false;
  for (auto& f : together) EXPECT_TRUE(f.get().sentences[0].translation.rfind("S(", 0) == 0);
  {
    std::lock_guard<std::mutex> lock(streams.mutex);
    EXPECT_EQ(streams.adds, (std::vector<int64_t>{1, 3}));
  }
  streams.hold = true;
  wait_for([&] { return streams.held.load(); });
  auto x = b.submit(job({"x"}, 2));
  auto bad = b.submit(job({"bad"}, 2));
  auto y = b.submit(job({"y"}, 2));
  streams.hold = false;
  EXPECT_EQ(x.get().sentences[0].translation, "S(x)");
  EXPECT_THROW(bad.get(), std::runtime_error);
  EXPECT_EQ(y.get().sentences[0].translation, "S(y)");
  EXPECT_EQ(running.get().sentences[0].translation, "S(running)");
  std::lock_guard<std::mutex> lock(streams.mutex);
  EXPECT_EQ(streams.adds, (std::vector<int64_t>{1, 3, 3, 1, 1, 1}));
}

TEST(Batcher, StopFinishesTheJobsInAStream) {
  FakeRunner fake;
  FakeStreams streams;
  auto b = std::make_unique<Batcher>(no_delay(), [&](const auto& jobs) { return fake(jobs); },
                                     fake_streams(streams));
  auto a = b->submit(job({"a"}, 50));
  wait_for([&] { return streams.steps > 0; });
  auto c = b->submit(job({"c"}, 5));
  b->stop();
  EXPECT_EQ(a.get().sentences[0].translation, "S(a)");
  EXPECT_EQ(c.get().sentences[0].translation, "S(c)");
}

int status_of(const std::string& body, RequestLimits limits = {}) {
  try {
    parse_translate_request(body, limits);
  } catch (const RequestError& e) {
    return e.status();
  }
  return 200;
}

std::string message_of(const std::string& body) {
  try {
    parse_translate_request(body, {});
  } catch (const RequestError& e) {
    return e.what();
  }
  return "";
}

TEST(Request, ReadsTheFields) {
  const TranslateRequest r = parse_translate_request(R"({"text": ["你好", ""], "beam": 4, "attention": true})", {});
  EXPECT_EQ(r.text, (std::vector<std::string>{"你好", ""}));
  EXPECT_EQ(r.beam, 4);
  EXPECT_TRUE(r.attention);
  const TranslateRequest one = parse_translate_request(R"({"text": "一"})", {});
  EXPECT_EQ(one.text, (std::vector<std::string>{"一"}));
  EXPECT_FALSE(one.beam.has_value());  // not given
  EXPECT_FALSE(one.attention);
  // Not given: the checkpoint's decode.beam; given, the request's (1 and 0 are greedy).
  EXPECT_EQ(job_beam(one, 4), 4);
  EXPECT_EQ(job_beam(one, 0), 0);
  EXPECT_EQ(job_beam(one, 1), 0);
  EXPECT_EQ(job_beam(r, 0), 4);
  EXPECT_EQ(job_beam(parse_translate_request(R"({"text": "一", "beam": 1})", {}), 4), 0);
  // 0 is greedy, as on the command line and in configs, not "not given".
  EXPECT_EQ(job_beam(parse_translate_request(R"({"text": "一", "beam": 0})", {}), 4), 0);
}

TEST(Request, EveryWrongShapeIsA4xxNamingTheField) {
  EXPECT_EQ(status_of(""), 400);
  EXPECT_EQ(status_of("{\"text\": [\"a\""), 400);         // truncated JSON
  EXPECT_EQ(status_of("[\"a\"]"), 400);                    // not an object
  EXPECT_EQ(status_of("{}"), 400);                         // no text
  EXPECT_EQ(status_of("{\"text\": []}"), 400);
  EXPECT_EQ(status_of("{\"text\": 5}"), 400);
  EXPECT_EQ(status_of("{\"text\": [\"a\", 5]}"), 400);
  EXPECT_EQ(status_of("{\"text\": [\"a\"], \"beam\": -1}"), 400);
  EXPECT_EQ(status_of("{\"text\": [\"a\"], \"beam\": 0}"), 200);
  EXPECT_EQ(status_of("{\"text\": [\"a\"], \"beam\": 9}"), 400);
  EXPECT_EQ(status_of("{\"text\": [\"a\"], \"beam\": 2.5}"), 400);
  EXPECT_EQ(status_of("{\"text\": [\"a\"], \"beam\": \"2\"}"), 400);
  EXPECT_EQ(status_of("{\"text\": [\"a\"], \"attention\": 1}"), 400);
  EXPECT_EQ(status_of("{\"text\": [\"a\"], \"bean\": 2}"), 400);  // misspelt field
  EXPECT_EQ(status_of("{\"text\": [\"a\\u0000b\"]}"), 400);       // NUL
  EXPECT_EQ(status_of("{\"text\": [\"\xe4\xbd\"]}"), 400);         // invalid UTF-8
  EXPECT_EQ(status_of("{\"text\": [\"\\ud800\"]}"), 400);          // lone surrogate
  RequestLimits two;
  two.max_sentences = 2;
  EXPECT_EQ(status_of("{\"text\": [\"a\", \"b\", \"c\"]}", two), 413);
  EXPECT_EQ(status_of("{\"text\": [\"a\", \"b\"]}", two), 200);
  EXPECT_NE(message_of("{\"text\": [\"a\", 5]}").find("text[1]"), std::string::npos);
  EXPECT_NE(message_of("{\"text\": [\"a\"], \"beam\": 9}").find("beam"), std::string::npos);
  EXPECT_NE(message_of("{\"text\": [\"\xe4\xbd\"]}").find("UTF-8"), std::string::npos);
  EXPECT_EQ(error_json(400, "x \"y\""), R"({"error":{"code":400,"message":"x \"y\""}})");
}

TEST(Request, TextsWithLineBreaksAreTranslatedLineByLine) {
  TranslateRequest r;
  r.text = {"一\n二\r\n三", "四", "", "五\n"};
  std::vector<size_t> owner;
  const std::vector<std::string> lines = split_lines(r, {}, &owner);
  EXPECT_EQ(lines, (std::vector<std::string>{"一", "二", "三", "四", "", "五", ""}));
  EXPECT_EQ(owner, (std::vector<size_t>{0, 0, 0, 1, 2, 3, 3}));
  EXPECT_EQ(join_lines({"one", "two", "three", "four", "", "five", ""}, owner, 4),
            (std::vector<std::string>{"one\ntwo\nthree", "four", "", "five\n"}));
  RequestLimits three;
  three.max_sentences = 3;
  r.text = {"a\nb", "c\nd"};
  try {
    split_lines(r, three, &owner);
    ADD_FAILURE() << "4 lines passed a limit of 3";
  } catch (const RequestError& e) {
    EXPECT_EQ(e.status(), 413);
  }
  r.attention = true;
  r.text = {"a", "b\nc"};
  try {
    split_lines(r, {}, &owner);
    ADD_FAILURE() << "attention over a text with line breaks";
  } catch (const RequestError& e) {
    EXPECT_EQ(e.status(), 400);
    EXPECT_NE(std::string(e.what()).find("text[1]"), std::string::npos);
  }
}

TEST(Metrics, PrometheusTextWithCumulativeBuckets) {
  Metrics m;
  m.request("/v1/translate", 200);
  m.request("/v1/translate", 200);
  m.request("/v1/translate", 400);
  m.request("other", 404);
  m.latency(0.02);
  m.latency(3.0);
  m.batch(8, 0.2);
  m.translated(8, 100, 120, 3);
  const std::string text = m.render(5);
  const auto has = [&](const std::string& line) { return text.find(line + "\n") != std::string::npos; };
  EXPECT_TRUE(has("nmt_http_requests_total{path=\"/v1/translate\",code=\"200\"} 2"));
  EXPECT_TRUE(has("nmt_http_errors_total{code=\"400\"} 1"));
  EXPECT_TRUE(has("nmt_http_errors_total{code=\"404\"} 1"));
  EXPECT_TRUE(has("nmt_translate_latency_seconds_bucket{le=\"0.025\"} 1"));
  EXPECT_TRUE(has("nmt_translate_latency_seconds_bucket{le=\"2.5\"} 1"));
  EXPECT_TRUE(has("nmt_translate_latency_seconds_bucket{le=\"5\"} 2"));
  EXPECT_TRUE(has("nmt_translate_latency_seconds_bucket{le=\"+Inf\"} 2"));
  EXPECT_TRUE(has("nmt_translate_latency_seconds_count 2"));
  EXPECT_TRUE(has("nmt_batch_sentences_bucket{le=\"4\"} 0"));
  EXPECT_TRUE(has("nmt_batch_sentences_bucket{le=\"8\"} 1"));
  EXPECT_TRUE(has("nmt_queue_sentences 5"));
  EXPECT_TRUE(has("nmt_source_tokens_total 100"));
  EXPECT_TRUE(has("nmt_target_tokens_total 120"));
  EXPECT_TRUE(has("nmt_length_limited_total 3"));  // translations that stopped at the length limit
  EXPECT_TRUE(has("nmt_tokens_per_second 22"));  // 220 tokens in the last 10 s
  EXPECT_TRUE(has("# TYPE nmt_translate_latency_seconds histogram"));
}

}  // namespace
}  // namespace nmt::serve

namespace nmt::serve {
namespace {

// serve/access.h: what each header names, and which requests go on.
TEST(Access, HostMustNameTheService) {
  EXPECT_EQ(host_name("127.0.0.1:8080"), "127.0.0.1");
  EXPECT_EQ(host_name("[::1]:8080"), "::1");
  EXPECT_EQ(host_name("LocalHost."), "localhost");
  EXPECT_EQ(host_name("example.org:80x"), "");
  EXPECT_EQ(host_name("[::1"), "");
  const AccessPolicy open;
  for (const char* ok : {"127.0.0.1:9", "localhost:9", "[::1]:9", "10.1.2.3", "LOCALHOST"})
    EXPECT_FALSE(check_host(ok, open)) << ok;
  for (const char* bad : {"evil.example:9", "localhost.evil.example", "127.0.0.1.nip.io"})
    EXPECT_EQ(check_host(bad, open)->status, 403) << bad;
  EXPECT_EQ(check_host("", open)->status, 400);
  AccessPolicy named;
  named.allow_hosts = {"MT.example.org"};
  EXPECT_FALSE(check_host("mt.example.org:443", named));
  EXPECT_EQ(check_host("example.org", named)->status, 403);
}

TEST(Access, OriginMustBeTheServiceOrAllowed) {
  AccessPolicy policy;
  EXPECT_FALSE(check_origin(false, "", "127.0.0.1:8080", policy));  // no Origin: not a cross-site browser call
  EXPECT_FALSE(check_origin(true, "http://127.0.0.1:8080", "127.0.0.1:8080", policy));
  EXPECT_FALSE(check_origin(true, "https://mt.example.org", "mt.example.org", policy));  // behind a TLS proxy
  EXPECT_EQ(check_origin(true, "http://127.0.0.1:9999", "127.0.0.1:8080", policy)->status, 403);
  EXPECT_EQ(check_origin(true, "null", "127.0.0.1:8080", policy)->status, 403);
  EXPECT_EQ(check_origin(true, "", "127.0.0.1:8080", policy)->status, 403);
  policy.allow_origins = {"https://app.example.org"};
  EXPECT_FALSE(check_origin(true, "https://APP.example.org", "127.0.0.1:8080", policy));
}

// CORS: an --allow-origin page is told it may read the answers, and its
// preflights get the route's methods and the headers a page sends; nobody
// else gets either (tests/cors_test.py drives the same from Chromium).
// --allow-origin as a browser's Origin header writes it: the forms a user
// types for the same origin all match, and what no Origin header holds is
// refused naming the flag (it would answer that page 403 on every call).
TEST(Access, AllowedOriginsAreWrittenAsBrowsersSendThem) {
  EXPECT_EQ(normalize_origin("http://example.test"), "http://example.test");
  EXPECT_EQ(normalize_origin("http://example.test/"), "http://example.test");
  EXPECT_EQ(normalize_origin("http://example.test:80"), "http://example.test");
  EXPECT_EQ(normalize_origin("HTTPS://Example.Test:443/"), "https://example.test");
  EXPECT_EQ(normalize_origin("https://example.test:80"), "https://example.test:80");
  EXPECT_EQ(normalize_origin("http://127.0.0.1:08080"), "http://127.0.0.1:8080");
  EXPECT_EQ(normalize_origin("http://[::1]:8080/"), "http://[::1]:8080");
  for (const char* bad : {"example.test", "ftp://example.test", "http://example.test/app", "http://example.test?x=1",
                          "http://user@example.test", "http://example.test:", "http://example.test:99999",
                          "http://", "http://[::1", "http://[nope]:80", "http://exa mple.test", "http://例子.测试"}) {
    try {
      normalize_origin(bad);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const InputError& e) {
      EXPECT_EQ(std::string(e.what()).rfind(std::string("--allow-origin: '") + bad + "'", 0), 0u) << e.what();
    }
  }
  // Normalized, a page's Origin matches it.
  AccessPolicy policy;
  policy.allow_origins = {normalize_origin("http://example.test:80/")};
  EXPECT_FALSE(check_origin(true, "http://example.test", "127.0.0.1:8080", policy));
}

TEST(Access, CorsHeadersForAllowedOriginsOnly) {
  AccessPolicy policy;
  policy.allow_origins = {"http://127.0.0.1:5000"};
  const auto value = [](const Headers& h, const std::string& name) {
    for (const auto& [n, v] : h)
      if (n == name) return v;
    return std::string("(none)");
  };
  const Headers plain = cors_headers(true, "http://127.0.0.1:5000", policy);
  EXPECT_EQ(value(plain, "Access-Control-Allow-Origin"), "http://127.0.0.1:5000");
  EXPECT_EQ(value(plain, "Access-Control-Expose-Headers"), "Retry-After, Server-Timing");
  EXPECT_TRUE(cors_headers(true, "http://127.0.0.1:5001", policy).empty());  // not listed
  EXPECT_TRUE(cors_headers(false, "", policy).empty());                      // no Origin: no browser page
  const Headers pre = preflight_headers(true, "http://127.0.0.1:5000", true, "POST", policy);
  EXPECT_EQ(value(pre, "Access-Control-Allow-Origin"), "http://127.0.0.1:5000");
  EXPECT_EQ(value(pre, "Access-Control-Allow-Methods"), "POST");
  EXPECT_EQ(value(pre, "Access-Control-Allow-Headers"), "Content-Type, Authorization");
  EXPECT_EQ(value(pre, "Access-Control-Max-Age"), "600");
  EXPECT_TRUE(preflight_headers(true, "http://127.0.0.1:5000", false, "POST", policy).empty());  // a plain OPTIONS
  EXPECT_TRUE(preflight_headers(true, "https://attacker.example", true, "POST", policy).empty());
}

TEST(Access, ApiKeysWhenConfigured) {
  AccessPolicy policy;
  EXPECT_FALSE(check_api_key("", policy));  // no keys: none asked for
  policy.api_keys = {"0123456789abcdef0123", "fedcba9876543210fedc"};
  EXPECT_FALSE(check_api_key("Bearer 0123456789abcdef0123", policy));
  EXPECT_FALSE(check_api_key("bearer fedcba9876543210fedc", policy));
  for (const char* bad : {"", "Bearer", "Bearer ", "Basic 0123456789abcdef0123", "Bearer 0123456789abcdef012",
                          "Bearer 0123456789abcdef01234", "0123456789abcdef0123"})
    EXPECT_EQ(check_api_key(bad, policy)->status, 401) << bad;
}

TEST(Access, KeyFilesAndLoopback) {
  const std::string dir = ::testing::TempDir();
  const std::string good = dir + "/nmt_keys_good.txt", short_key = dir + "/nmt_keys_short.txt";
  std::ofstream(good) << "# keys\n\n  0123456789abcdef0123  \r\n";
  std::ofstream(short_key) << "0123456789abcdef\nshort\n";
  EXPECT_EQ(read_api_keys(good), std::vector<std::string>{"0123456789abcdef0123"});
  EXPECT_THROW(read_api_keys(short_key), InputError);
  EXPECT_THROW(read_api_keys(dir + "/nmt_keys_missing.txt"), InputError);
  for (const char* local : {"127.0.0.1", "127.1.2.3", "::1", "localhost"}) EXPECT_FALSE(reachable_beyond_loopback(local));
  for (const char* wide : {"0.0.0.0", "::", "10.0.0.1", "example.org"}) EXPECT_TRUE(reachable_beyond_loopback(wide));
}

}  // namespace
}  // namespace nmt::serve

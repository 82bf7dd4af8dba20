// The Apache InLong TubeMQ Java client (org.apache.inlong:tubemq-client 1.13.0) as a peer of fastmq's tests and
// benchmarks. Compiled and run by tests/support/tubemq.py.
//   produce MASTER TOPIC COUNT SIZE MODE   MODE sync or async; bodies are "<index>" padded with '.' to SIZE bytes
//   consume MASTER TOPIC GROUP COUNT QUIET [IDLE_MS]   QUIET 1 prints no bodies; with IDLE_MS > 0 it also ends
//       when nothing came for IDLE_MS after its first message (a member of a group reads only its share)
//   bound MASTER TOPIC GROUP COUNT SESSION PARTKEY=OFFSET[,...]   a consumer of a bound session of one member:
//       completeSubscribe(SESSION, 1, true, {PARTKEY: OFFSET}); ends at COUNT or after 3 s without a message
// Output: one "BODY <text>" line per message consumed (unless QUIET), then "DONE <count> <milliseconds> <cpu
// microseconds>": the time and the JVM's CPU time of the timed part (from the first send, or the first message).
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.inlong.tubemq.client.config.ConsumerConfig;
import org.apache.inlong.tubemq.client.config.TubeClientConfig;
import org.apache.inlong.tubemq.client.consumer.ConsumePosition;
import org.apache.inlong.tubemq.client.consumer.ConsumerResult;
import org.apache.inlong.tubemq.client.consumer.PullMessageConsumer;
import org.apache.inlong.tubemq.client.factory.MessageSessionFactory;
import org.apache.inlong.tubemq.client.factory.TubeSingleSessionFactory;
import org.apache.inlong.tubemq.client.producer.MessageProducer;
import org.apache.inlong.tubemq.client.producer.MessageSentCallback;
import org.apache.inlong.tubemq.client.producer.MessageSentResult;
import org.apache.inlong.tubemq.corebase.Message;

public final class TubeMQPeer {
    private static final long DEADLINE_MS = 120_000;

    public static void main(String[] args) throws Throwable {
        if (args[0].equals("produce")) {
            produce(args[1], args[2], Integer.parseInt(args[3]), Integer.parseInt(args[4]), args[5].equals("async"));
        } else if (args[0].equals("bound")) {
            Map<String, Long> offsets = new HashMap<>();
            for (String entry : args[6].split(",")) {
                int eq = entry.lastIndexOf('=');
                offsets.put(entry.substring(0, eq), Long.parseLong(entry.substring(eq + 1)));
            }
            consume(args[1], args[2], args[3], Integer.parseInt(args[4]), false, 3000, args[5], offsets);
        } else {
            consume(args[1], args[2], args[3], Integer.parseInt(args[4]), args[5].equals("1"),
                    args.length > 6 ? Long.parseLong(args[6]) : 0, null, null);
        }
        System.exit(0);
    }

    private static long cpuNanos() {
        return ((com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean())
                .getProcessCpuTime();
    }

    private static byte[] body(int index, int size) {
        byte[] text = Integer.toString(index).getBytes(StandardCharsets.UTF_8);
        byte[] out = new byte[Math.max(size, text.length)];
        Arrays.fill(out, (byte) '.');
        System.arraycopy(text, 0, out, 0, text.length);
        return out;
    }

    private static void produce(String master, String topic, int count, int size, boolean async) throws Throwable {
        TubeClientConfig config = new TubeClientConfig(master);
        MessageSessionFactory factory = new TubeSingleSessionFactory(config);
        MessageProducer producer = factory.createProducer();
        producer.publish(topic);
        long started = System.nanoTime();
        long cpuStarted = cpuNanos();
        if (async) {
            Semaphore window = new Semaphore(2000);      // messages in flight at once
            AtomicLong failed = new AtomicLong();
            AtomicReference<String> error = new AtomicReference<>();
            for (int i = 0; i < count; i++) {
                window.acquire();
                producer.sendMessage(new Message(topic, body(i, size)), new MessageSentCallback() {
                    public void onMessageSent(MessageSentResult result) {
                        if (!result.isSuccess()) {
                            failed.incrementAndGet();
                            error.set(result.getErrCode() + " " + result.getErrMsg());
                        }
                        window.release();
                    }

                    public void onException(Throwable e) {
                        failed.incrementAndGet();
                        error.set(e.toString());
                        window.release();
                    }
                });
            }
            if (!window.tryAcquire(2000, DEADLINE_MS, TimeUnit.MILLISECONDS) || failed.get() > 0) {
                throw new IllegalStateException(failed.get() + " sends failed: " + error.get());
            }
        } else {
            for (int i = 0; i < count; i++) {
                MessageSentResult result = producer.sendMessage(new Message(topic, body(i, size)));
                if (!result.isSuccess()) {
                    throw new IllegalStateException("send failed: " + result.getErrCode() + " " + result.getErrMsg());
                }
            }
        }
        long elapsed = (System.nanoTime() - started) / 1_000_000;
        System.out.println("DONE " + count + " " + elapsed + " " + (cpuNanos() - cpuStarted) / 1000);
        System.out.flush();
        producer.shutdown();
        factory.shutdown();
    }

    private static void consume(String master, String topic, String group, int count, boolean quiet, long idleMs,
                                String sessionKey, Map<String, Long> offsets) throws Throwable {
        ConsumerConfig config = new ConsumerConfig(master, group);
        config.setConsumePosition(ConsumePosition.CONSUMER_FROM_FIRST_OFFSET);
        config.setHeartbeatPeriodMs(500);
        config.setMsgNotFoundWaitPeriodMs(20);
        MessageSessionFactory factory = new TubeSingleSessionFactory(config);
        PullMessageConsumer consumer = factory.createPullConsumer(config);
        consumer.subscribe(topic, null);
        if (sessionKey == null) {
            consumer.completeSubscribe();
        } else {
            consumer.completeSubscribe(sessionKey, 1, true, offsets);
        }
        long deadline = System.currentTimeMillis() + DEADLINE_MS;
        long started = 0;
        long cpuStarted = 0;
        long lastMessage = 0;
        int received = 0;
        StringBuilder out = new StringBuilder();
        System.out.println("SUBSCRIBED " + consumer.getConsumerId());
        System.out.flush();
        while (received < count && System.currentTimeMillis() < deadline
                && !(idleMs > 0 && lastMessage > 0 && System.currentTimeMillis() - lastMessage > idleMs)) {
            ConsumerResult result = consumer.getMessage();
            if (!result.isSuccess()) {
                Thread.sleep(5);
                continue;
            }
            if (started == 0) {
                started = System.nanoTime();
                cpuStarted = cpuNanos();
            }
            lastMessage = System.currentTimeMillis();
            for (Message message : result.getMessageList()) {
                received++;
                if (!quiet) {
                    out.append("BODY ").append(new String(message.getData(), StandardCharsets.UTF_8)).append('\n');
                }
            }
            consumer.confirmConsume(result.getConfirmContext(), true);
        }
        long elapsed = started == 0 ? 0 : (System.nanoTime() - started) / 1_000_000;
        long cpu = started == 0 ? 0 : (cpuNanos() - cpuStarted) / 1000;
        System.out.print(out);
        System.out.println("DONE " + received + " " + elapsed + " " + cpu);
        System.out.flush();
        consumer.shutdown();
        factory.shutdown();
    }
}

// The Java side of benches/bench_rocketmq.py: Apache RocketMQ's own client (rocketmq-client), driven by commands
// on stdin ("<mode> <topic> <count> <group>", modes sync async oneway batch consume), answering "done <cpu ns>"
// once the work is over (or "error <what>"), so the JVM's start is not measured. 100-byte bodies; at most 10000 async sends in flight.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.management.ManagementFactory;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Semaphore;

import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendCallback;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;

public class RocketMQBench {
    static long cpu() {
        return ((com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean())
            .getProcessCpuTime();
    }

    public static void main(String[] args) throws Exception {
        DefaultMQProducer producer = new DefaultMQProducer("java-bench-producer");
        producer.setNamesrvAddr(args[0]);
        producer.setSendMsgTimeout(30000);
        producer.start();
        byte[] body = new byte[100];
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        String line;
        while ((line = in.readLine()) != null) {
            String[] command = line.trim().split(" ");
            try {
                System.out.println("done " + run(producer, args[0], command, body));
            } catch (Exception error) {
                System.out.println("error " + error.toString().replace('\n', ' '));
            }
            System.out.flush();
        }
        producer.shutdown();
        System.exit(0);
    }

    // Runs one command; returns the CPU time it took (all threads), in nanoseconds.
    static long run(DefaultMQProducer producer, String namesrv, String[] command, byte[] body) throws Exception {
        String mode = command[0];
        String topic = command[1];
        int count = Integer.parseInt(command[2]);
        long started = cpu();
        if (mode.equals("sync")) {
            for (int i = 0; i < count; i++) {
                producer.send(new Message(topic, body));
            }
        } else if (mode.equals("async")) {
            Semaphore inFlight = new Semaphore(10000);
            CountDownLatch done = new CountDownLatch(count);
            SendCallback callback = new SendCallback() {
                public void onSuccess(SendResult result) { inFlight.release(); done.countDown(); }
                public void onException(Throwable error) { inFlight.release(); done.countDown(); }
            };
            for (int i = 0; i < count; i++) {
                inFlight.acquire();
                producer.send(new Message(topic, body), callback);
            }
            done.await();
        } else if (mode.equals("oneway")) {
            for (int i = 0; i < count; i++) {
                producer.sendOneway(new Message(topic, body));
            }
            // after the oneway ones on the same connection; the broker answers SYSTEM_BUSY while its send queue is full
            for (int attempt = 0; ; attempt++) {
                try {
                    producer.send(new Message(topic, body));
                    break;
                } catch (Exception busy) {
                    if (attempt == 299) {
                        throw busy;
                    }
                    Thread.sleep(100);
                }
            }
        } else if (mode.equals("batch")) {
            for (int i = 0; i < count; i += 100) {
                List<Message> batch = new ArrayList<>();
                for (int j = i; j < Math.min(count, i + 100); j++) {
                    batch.add(new Message(topic, body));
                }
                producer.send(batch);
            }
        } else if (mode.equals("consume")) {
            DefaultLitePullConsumer consumer = new DefaultLitePullConsumer(command[3]);
            consumer.setNamesrvAddr(namesrv);
            consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
            consumer.setPullBatchSize(32);
            consumer.subscribe(topic, "*");
            consumer.start();
            int seen = 0;
            while (seen < count) {
                seen += consumer.poll(1000).size();
            }
            consumer.shutdown();
        }
        return cpu() - started;
    }
}

// Drives Apache RocketMQ's Java client (org.apache.rocketmq:rocketmq-client, pinned in tests/support/servers.py)
// against a namesrv + broker, scenario by scenario, in one JVM. Usage: RocketMQPeer NAMESRV RUN_ID [SCENARIO
// [ACCESS_KEY SECRET_KEY [SECURITY_TOKEN]]] (the acl scenarios run only when named, against a broker with ACL on).
// Every scenario prints one line "RESULT <scenario> key=value ..." (or "FAIL <scenario> <reason>") that the
// Python test reads; each is bounded in time. Topics and groups carry RUN_ID so that runs never share state.
import java.nio.charset.StandardCharsets;
import java.util.*;
import java.util.concurrent.*;
import java.util.concurrent.atomic.*;

import org.apache.rocketmq.acl.common.AclClientRPCHook;
import org.apache.rocketmq.acl.common.SessionCredentials;
import org.apache.rocketmq.client.ClientConfig;
import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.*;
import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.client.producer.*;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.*;
import org.apache.rocketmq.common.protocol.heartbeat.MessageModel;
import org.apache.rocketmq.remoting.RPCHook;

public class RocketMQPeer {
    static final long DEADLINE_MS = 60_000;
    static String namesrv;
    static String run;
    static String accessKey;
    static String secretKey;
    static String securityToken;

    public static void main(String[] args) throws Exception {
        namesrv = args[0];
        run = args[1];
        String only = args.length > 2 ? args[2] : "";
        accessKey = args.length > 4 ? args[3] : "";
        secretKey = args.length > 4 ? args[4] : "";
        securityToken = args.length > 5 ? args[5] : null;
        Map<String, Callable<String>> scenarios = new LinkedHashMap<>();
        scenarios.put("produce_pull", RocketMQPeer::producePull);
        scenarios.put("push_retry_dlq", RocketMQPeer::pushRetryDlq);
        scenarios.put("broadcast", RocketMQPeer::broadcast);
        scenarios.put("orderly", RocketMQPeer::orderly);
        scenarios.put("acl", RocketMQPeer::acl);
        scenarios.put("acl_perms", RocketMQPeer::aclPerms);
        for (Map.Entry<String, Callable<String>> scenario : scenarios.entrySet()) {
            if (only.isEmpty() ? scenario.getKey().startsWith("acl") : !only.equals(scenario.getKey())) continue;
            long started = System.currentTimeMillis();
            try {
                String result = scenario.getValue().call();
                System.out.println("RESULT " + scenario.getKey() + " " + result + " ms="
                    + (System.currentTimeMillis() - started));
            } catch (Throwable e) {
                System.out.println("FAIL " + scenario.getKey() + " " + e.toString().replace('\n', ' '));
                e.printStackTrace(System.out);
            }
            System.out.flush();
        }
        System.exit(0);
    }

    // Every client: the namesrv, its own instance, and 15 s (not 3 s) for route and other client API calls, so
    // that a busy shared test machine does not time them out.
    static <T extends ClientConfig> T client(T config, String instance) {
        config.setNamesrvAddr(namesrv);
        config.setInstanceName(instance);
        config.setMqClientApiTimeout(15_000);
        return config;
    }

    static DefaultMQProducer producer(String group) throws Exception {
        DefaultMQProducer producer = client(new DefaultMQProducer(group + "-" + run), group + "-" + run);
        producer.setSendMsgTimeout(15_000);
        producer.start();
        return producer;
    }

    static Message message(String topic, String tags, String keys, String body) {
        return new Message(topic, tags, keys, body.getBytes(StandardCharsets.UTF_8));
    }

    // Sync, oneway, async and batch sends to a topic created on first send; then a lite pull consumer reads
    // every queue from the start.
    static String producePull() throws Exception {
        String topic = "java-produce-" + run;
        DefaultMQProducer producer = producer("pp");
        List<String> ids = new ArrayList<>();
        int sent = 0;
        try {
            for (int i = 0; i < 10; i++) {
                SendResult result = producer.send(message(topic, "TagA", "key-" + i, "sync-" + i));
                if (result.getSendStatus() != SendStatus.SEND_OK) throw new IllegalStateException("status " + result);
                ids.add(result.getOffsetMsgId());
                sent++;
            }
            for (int i = 0; i < 5; i++) {
                producer.sendOneway(message(topic, "TagB", null, "oneway-" + i));
                sent++;
            }
            CountDownLatch async = new CountDownLatch(5);
            AtomicReference<Throwable> asyncError = new AtomicReference<>();
            for (int i = 0; i < 5; i++) {
                producer.send(message(topic, "TagA", null, "async-" + i), new SendCallback() {
                    public void onSuccess(SendResult result) { async.countDown(); }
                    public void onException(Throwable e) { asyncError.set(e); async.countDown(); }
                });
                sent++;
            }
            if (!async.await(30, TimeUnit.SECONDS) || asyncError.get() != null)
                throw new IllegalStateException("async sends: " + asyncError.get());
            List<Message> batch = new ArrayList<>();
            for (int i = 0; i < 10; i++) batch.add(message(topic, "TagC", null, "batch-" + i));
            SendResult batchResult = producer.send(batch);
            if (batchResult.getSendStatus() != SendStatus.SEND_OK) throw new IllegalStateException("batch " + batchResult);
            sent += 10;
        } finally {
            producer.shutdown();
        }
        DefaultLitePullConsumer consumer = client(new DefaultLitePullConsumer("pull-" + run), "pull-" + run);
        consumer.setAutoCommit(false);
        consumer.start();
        Set<String> bodies = new TreeSet<>();
        int tagA = 0;
        try {
            Collection<MessageQueue> queues = consumer.fetchMessageQueues(topic);
            consumer.assign(queues);
            for (MessageQueue queue : queues) consumer.seek(queue, 0);
            long deadline = System.currentTimeMillis() + DEADLINE_MS;
            while (bodies.size() < sent && System.currentTimeMillis() < deadline) {
                for (MessageExt m : consumer.poll(1000)) {
                    bodies.add(new String(m.getBody(), StandardCharsets.UTF_8));
                    if ("TagA".equals(m.getTags())) tagA++;
                }
            }
            return "topic=" + topic + " sent=" + sent + " queues=" + queues.size() + " pulled=" + bodies.size()
                + " tagA=" + tagA + " first_offset_msg_id=" + ids.get(0);
        } finally {
            consumer.shutdown();
        }
    }

    // A push consumer (clustering) fails the message tagged "bad" every time: it is redelivered through the
    // retry topic maxReconsumeTimes times, then lands in %DLQ%<group>. The others are consumed once.
    static String pushRetryDlq() throws Exception {
        String topic = "java-retry-" + run;
        String group = "retry-" + run;
        DefaultMQProducer producer = producer("rp");
        try {
            producer.send(message(topic, "warmup", null, "create"));
        } finally {
            producer.shutdown();
        }
        DefaultMQPushConsumer consumer = client(new DefaultMQPushConsumer(group), group);
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.setMaxReconsumeTimes(2);
        consumer.subscribe(topic, "good || bad");
        AtomicInteger good = new AtomicInteger();
        AtomicInteger bad = new AtomicInteger();
        AtomicInteger maxReconsume = new AtomicInteger();
        consumer.registerMessageListener((MessageListenerConcurrently) (messages, context) -> {
            for (MessageExt m : messages) {
                maxReconsume.accumulateAndGet(m.getReconsumeTimes(), Math::max);
                if ("bad".equals(m.getTags())) {
                    bad.incrementAndGet();
                    return ConsumeConcurrentlyStatus.RECONSUME_LATER;
                }
                good.incrementAndGet();
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();
        producer = producer("rp2");
        try {
            for (int i = 0; i < 5; i++) producer.send(message(topic, "good", null, "good-" + i));
            producer.send(message(topic, "bad", "poison", "bad-0"));
            long deadline = System.currentTimeMillis() + DEADLINE_MS;
            while ((good.get() < 5 || bad.get() < 3) && System.currentTimeMillis() < deadline) Thread.sleep(50);
            Thread.sleep(600);      // a fourth delivery would come within the (100 ms) delay levels
            return "group=" + group + " good=" + good.get() + " bad_deliveries=" + bad.get()
                + " max_reconsume_times=" + maxReconsume.get();
        } finally {
            producer.shutdown();
            consumer.shutdown();
        }
    }

    // Two consumers of one group in BROADCASTING mode each get every message.
    static String broadcast() throws Exception {
        String topic = "java-broadcast-" + run;
        String group = "bcast-" + run;
        DefaultMQProducer producer = producer("bp");
        List<DefaultMQPushConsumer> consumers = new ArrayList<>();
        List<Set<String>> seen = new ArrayList<>();
        try {
            producer.send(message(topic, "x", null, "create"));
            for (int c = 0; c < 2; c++) {
                Set<String> bodies = ConcurrentHashMap.newKeySet();
                seen.add(bodies);
                DefaultMQPushConsumer consumer = client(new DefaultMQPushConsumer(group), group + "-" + c);
                consumer.setMessageModel(MessageModel.BROADCASTING);
                consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
                consumer.subscribe(topic, "*");
                consumer.registerMessageListener((MessageListenerConcurrently) (messages, context) -> {
                    for (MessageExt m : messages) bodies.add(new String(m.getBody(), StandardCharsets.UTF_8));
                    return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
                });
                consumer.start();
                consumers.add(consumer);
            }
            for (int i = 0; i < 10; i++) producer.send(message(topic, "x", null, "b-" + i));
            long deadline = System.currentTimeMillis() + DEADLINE_MS;
            while ((seen.get(0).size() < 11 || seen.get(1).size() < 11) && System.currentTimeMillis() < deadline)
                Thread.sleep(50);
            return "first=" + seen.get(0).size() + " second=" + seen.get(1).size();
        } finally {
            producer.shutdown();
            for (DefaultMQPushConsumer consumer : consumers) consumer.shutdown();
        }
    }

    // Messages of one order id go to one queue (selector); an orderly consumer (queue locks) sees each order's
    // steps in sequence.
    static String orderly() throws Exception {
        String topic = "java-orderly-" + run;
        String group = "orderly-" + run;
        DefaultMQProducer producer = producer("op");
        Map<Integer, List<Integer>> steps = new ConcurrentHashMap<>();
        AtomicInteger consumed = new AtomicInteger();
        DefaultMQPushConsumer consumer = client(new DefaultMQPushConsumer(group), group);
        try {
            producer.send(message(topic, "x", null, "create"));
            consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
            consumer.subscribe(topic, "order");
            consumer.registerMessageListener((MessageListenerOrderly) (messages, context) -> {
                for (MessageExt m : messages) {
                    String[] parts = new String(m.getBody(), StandardCharsets.UTF_8).split(":");
                    steps.computeIfAbsent(Integer.parseInt(parts[0]), k -> Collections.synchronizedList(new ArrayList<>()))
                        .add(Integer.parseInt(parts[1]));
                    consumed.incrementAndGet();
                }
                return ConsumeOrderlyStatus.SUCCESS;
            });
            consumer.start();
            MessageQueueSelector byOrder = (queues, msg, arg) -> queues.get((Integer) arg % queues.size());
            for (int step = 0; step < 5; step++)
                for (int order = 0; order < 4; order++)
                    producer.send(message(topic, "order", null, order + ":" + step), byOrder, order);
            long deadline = System.currentTimeMillis() + DEADLINE_MS;
            while (consumed.get() < 20 && System.currentTimeMillis() < deadline) Thread.sleep(50);
            boolean inOrder = steps.size() == 4;
            for (List<Integer> sequence : steps.values()) inOrder &= sequence.equals(Arrays.asList(0, 1, 2, 3, 4));
            return "consumed=" + consumed.get() + " orders=" + steps.size() + " in_order=" + inOrder;
        } finally {
            producer.shutdown();
            consumer.shutdown();
        }
    }

    // ACL 1.0 (rocketmq-acl's AclClientRPCHook signs every request): a signed producer sends and a signed lite
    // pull consumer reads back; a producer signing with a wrong secret and an unsigned one are refused, with the
    // response code the broker answered.
    static String acl() throws Exception {
        String topic = "java-acl-" + run;
        RPCHook signed = new AclClientRPCHook(new SessionCredentials(accessKey, secretKey));
        DefaultMQProducer producer = client(new DefaultMQProducer("aclp-" + run, signed), "aclp-" + run);
        producer.setSendMsgTimeout(15_000);
        producer.start();
        int sent = 0;
        try {
            for (int i = 0; i < 5; i++) {
                if (producer.send(message(topic, "T", null, "acl-" + i)).getSendStatus() == SendStatus.SEND_OK) sent++;
            }
        } finally {
            producer.shutdown();
        }
        DefaultLitePullConsumer consumer = client(new DefaultLitePullConsumer("aclc-" + run, signed), "aclc-" + run);
        consumer.setAutoCommit(false);
        consumer.start();
        Set<String> bodies = new TreeSet<>();
        try {
            Collection<MessageQueue> queues = consumer.fetchMessageQueues(topic);
            consumer.assign(queues);
            for (MessageQueue queue : queues) consumer.seek(queue, 0);
            long deadline = System.currentTimeMillis() + DEADLINE_MS;
            while (bodies.size() < sent && System.currentTimeMillis() < deadline)
                for (MessageExt m : consumer.poll(1000)) bodies.add(new String(m.getBody(), StandardCharsets.UTF_8));
        } finally {
            consumer.shutdown();
        }
        return "sent=" + sent + " pulled=" + bodies.size()
            + " wrong_secret=" + refusedCode(topic, new AclClientRPCHook(new SessionCredentials(accessKey, "wrong")))
            + " unsigned=" + refusedCode(topic, null);
    }

    // Per-topic permissions of plain_acl.yml (the broker's account file names t-pub, t-sub and t-deny) for a
    // session account: one send to each, signed with SessionCredentials holding the security token, and one
    // signed with a wrong token.
    static String aclPerms() throws Exception {
        RPCHook hook = new AclClientRPCHook(new SessionCredentials(accessKey, secretKey, securityToken));
        RPCHook wrongToken = new AclClientRPCHook(new SessionCredentials(accessKey, secretKey, securityToken + "-x"));
        return "t_pub=" + refusedCode("t-pub", hook, "aclp-pub-" + run)
            + " t_sub=" + refusedCode("t-sub", hook, "aclp-sub-" + run)
            + " t_deny=" + refusedCode("t-deny", hook, "aclp-deny-" + run)
            + " wrong_token=" + refusedCode("t-pub", wrongToken, "aclp-token-" + run);
    }

    // The response code of a refused send (or "sent" when the broker took it).
    static String refusedCode(String topic, RPCHook hook) throws Exception {
        return refusedCode(topic, hook, "aclx-" + (hook == null ? "unsigned-" : "wrong-") + run);
    }

    static String refusedCode(String topic, RPCHook hook, String group) throws Exception {
        DefaultMQProducer producer = client(new DefaultMQProducer(group, hook), group);
        producer.setSendMsgTimeout(15_000);
        producer.setRetryTimesWhenSendFailed(0);
        producer.start();
        try {
            producer.send(message(topic, "T", null, "refused"));
            return "sent";
        } catch (MQClientException e) {
            return String.valueOf(e.getResponseCode());
        } finally {
            producer.shutdown();
        }
    }
}

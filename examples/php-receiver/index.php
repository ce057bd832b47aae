<?php
// A delayq HTTP-target receiver that closes orders (docs/http-targets.md).
//
// delayq calls it when a shop_order_close job is due, with the job's payload
// {"order_no": "..."} as the body. It checks the request's signature and
// timestamp, then closes the order once: a table of closed order numbers
// with a unique key makes a repeated delivery (a retry, a job delivered
// again after a worker crash, a replayed request) change nothing.
//
// Answers: 200 closed, or already closed; 401 bad signature or timestamp;
// 400 malformed body; 405 not a POST; 500 the database failed (delayq
// retries). A 4xx makes the job dead at once, which is right for requests
// that will never succeed.
//
// Environment: WEBHOOK_SECRET (required, the secret delayq's secret_env
// names), RECEIVER_DB (the SQLite file, orders.sqlite next to this script
// unless set).

declare(strict_types=1);

const MAX_AGE_SECONDS = 300; // refuse requests signed longer ago than this

function answer(int $status, array $body): void
{
    http_response_code($status);
    header('Content-Type: application/json');
    echo json_encode($body), "\n";
    exit;
}

$secret = getenv('WEBHOOK_SECRET');
if ($secret === false || $secret === '') {
    error_log('php-receiver: WEBHOOK_SECRET is not set');
    answer(500, ['error' => 'the receiver has no secret']);
}
if ($_SERVER['REQUEST_METHOD'] !== 'POST') {
    header('Allow: POST');
    answer(405, ['error' => 'POST only']);
}

// The raw body, as signed: verify before json_decode.
$body = file_get_contents('php://input');
$ts = $_SERVER['HTTP_DELAYQ_TIMESTAMP'] ?? '';
$sig = $_SERVER['HTTP_DELAYQ_SIGNATURE'] ?? '';
if (!ctype_digit($ts) || abs(time() - (int) $ts) > MAX_AGE_SECONDS) {
    answer(401, ['error' => 'missing or stale Delayq-Timestamp']);
}
$want = 'v1=' . hash_hmac('sha256', $ts . '.' . $body, $secret);
if (!hash_equals($want, $sig)) {
    answer(401, ['error' => 'bad Delayq-Signature']);
}

$job = json_decode($body, true);
$orderNo = is_array($job) ? ($job['order_no'] ?? null) : null;
if (!is_string($orderNo) || !preg_match('/^[A-Za-z0-9_-]{1,64}$/', $orderNo)) {
    answer(400, ['error' => 'the body must be {"order_no": "<1-64 of A-Z a-z 0-9 _ ->"}']);
}

try {
    $db = new PDO('sqlite:' . (getenv('RECEIVER_DB') ?: __DIR__ . '/orders.sqlite'), null, null, [
        PDO::ATTR_ERRMODE => PDO::ERRMODE_EXCEPTION,
    ]);
    $db->exec('PRAGMA busy_timeout = 5000'); // concurrent deliveries wait for each other's writes
    $db->exec('CREATE TABLE IF NOT EXISTS closed_orders (
        order_no        TEXT    NOT NULL PRIMARY KEY,
        idempotency_key TEXT    NOT NULL,
        attempt         INTEGER NOT NULL,
        closed_at       INTEGER NOT NULL
    )');
    // In a real shop this insert and "UPDATE orders SET status = 'closed'
    // WHERE order_no = ? AND status = 'pending_payment'" share one
    // transaction, so the order is closed exactly when its row is written.
    $insert = $db->prepare('INSERT INTO closed_orders (order_no, idempotency_key, attempt, closed_at)
        VALUES (?, ?, ?, ?) ON CONFLICT (order_no) DO NOTHING');
    $insert->execute([
        $orderNo,
        $_SERVER['HTTP_IDEMPOTENCY_KEY'] ?? '',
        (int) ($_SERVER['HTTP_DELAYQ_ATTEMPT'] ?? 0),
        time(),
    ]);
} catch (PDOException $e) {
    error_log('php-receiver: order ' . $orderNo . ': ' . $e->getMessage());
    answer(500, ['error' => 'database error']);
}

answer(200, ['order_no' => $orderNo, 'closed' => true, 'already_closed' => $insert->rowCount() === 0]);

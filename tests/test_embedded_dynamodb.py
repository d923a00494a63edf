"""The embedded backend's DynamoDB is linearizable: one winner per race, every round.

moto alone lets two conditional writers both win in about 1 % of 50-way races
(docs/DESIGN.md); these tests race 50 clients in 2 processes for 200 rounds.
"""

import pytest

from idemlab import clients
from support.dynamodb_race import PROCESSING, SCHEDULED, race

ROUNDS = 200
CLIENTS = 50
PROCESSES = 2


def scan_all(table: str) -> list[dict]:
    paginator = clients.client("dynamodb").get_paginator("scan")
    return [item for page in paginator.paginate(TableName=table) for item in page["Items"]]


def assert_one_winner_every_round(winners):
    bad = {round_no: count for round_no, count in winners.items() if count != 1}
    assert not bad, f"rounds without exactly one winner (round: winners): {bad}"
    assert len(winners) == ROUNDS


@pytest.mark.timeout(600)
def test_conditional_put_has_exactly_one_winner_every_round(backend, table):
    winners = race(backend, "conditional_put", table, ROUNDS, CLIENTS, PROCESSES, prefix="k")
    assert_one_winner_every_round(winners)
    assert len(scan_all(table)) == ROUNDS


@pytest.mark.timeout(600)
def test_scheduled_to_processing_claim_has_exactly_one_winner_every_round(backend, table):
    ddb = clients.client("dynamodb")
    for round_no in range(ROUNDS):
        ddb.put_item(TableName=table, Item={"pk": {"S": f"k-{round_no}"}, "status": {"S": SCHEDULED}})
    winners = race(backend, "claim_update", table, ROUNDS, CLIENTS, PROCESSES, prefix="k")
    assert_one_winner_every_round(winners)
    assert {item["status"]["S"] for item in scan_all(table)} == {PROCESSING}


@pytest.mark.timeout(600)
def test_conditional_transaction_has_exactly_one_winner_and_no_partial_write(backend, table):
    winners = race(backend, "transact_put", table, ROUNDS, CLIENTS, PROCESSES, prefix="k")
    assert_one_winner_every_round(winners)
    effects = [item for item in scan_all(table) if "#effect#" in item["pk"]["S"]]
    # A cancelled transaction must not leave its second item behind.
    assert len(effects) == ROUNDS


def test_a_race_whose_clients_fail_raises_instead_of_counting_no_winners(backend):
    with pytest.raises(RuntimeError, match="racing clients failed"):
        race(backend, "conditional_put", "no-such-table", rounds=2, clients=2, processes=1)


def test_an_unknown_race_operation_is_refused_before_anything_runs(backend, table):
    with pytest.raises(ValueError, match="unknown operation 'put'"):
        race(backend, "put", table, rounds=2, clients=2, processes=1)
    assert scan_all(table) == []


def test_backend_counts_dynamodb_requests_by_action(backend, table):
    from idemlab.embedded.server import request_counts

    before = request_counts(backend)["dynamodb"]
    ddb = clients.client("dynamodb")
    ddb.put_item(TableName=table, Item={"pk": {"S": "counted"}})
    ddb.get_item(TableName=table, Key={"pk": {"S": "counted"}})
    ddb.get_item(TableName=table, Key={"pk": {"S": "counted"}})
    after = request_counts(backend)["dynamodb"]
    assert after.get("PutItem", 0) - before.get("PutItem", 0) == 1
    assert after.get("GetItem", 0) - before.get("GetItem", 0) == 2

-- Invariants of the test Temporal set's data (tests/sets/data/temporal): each a read-only
-- query that must return the same rows, as a multiset, before and after an upgrade.

-- name: dogs_per_kennel
SELECT k.kennel_id, k.name, count(d.dog_id) AS dogs
FROM kennels k LEFT JOIN dogs d ON d.kennel_id = k.kennel_id
GROUP BY k.kennel_id, k.name;

-- name: walked_minutes_per_dog
-- The walks' total per dog, summed from walks and with the columns named: 1.10's
-- dogs.walked_minutes (the same total, stored) is not selected, so it does not show.
SELECT d.kennel_id, d.dog_id, d.name, coalesce(sum(w.minutes), 0) AS minutes
FROM dogs d LEFT JOIN walks w ON w.kennel_id = d.kennel_id AND w.dog_id = d.dog_id
GROUP BY d.kennel_id, d.dog_id, d.name;

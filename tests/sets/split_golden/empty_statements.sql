;
CREATE INDEX tasks_queue ON tasks (queue);;
   ;
/* only a comment */ ;
-- and another
;
DROP INDEX tasks_queue;

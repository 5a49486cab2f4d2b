-- SPDX-License-Identifier: MIT
-- schema.sql — the demo stack's database: stories and their comments, filled from
-- MariaDB's built-in sequence tables.
CREATE DATABASE IF NOT EXISTS stack;
USE stack;
CREATE TABLE stories (
    id INT PRIMARY KEY,
    title VARCHAR(100) NOT NULL,
    body TEXT NOT NULL,
    author VARCHAR(40) NOT NULL,
    KEY (title)
) ENGINE=InnoDB;
CREATE TABLE comments (
    id INT PRIMARY KEY,
    story_id INT NOT NULL,
    author VARCHAR(40) NOT NULL,
    text VARCHAR(400) NOT NULL,
    KEY (story_id, id)
) ENGINE=InnoDB;
INSERT INTO stories
    SELECT seq, CONCAT(ELT(1 + seq % 8, 'a', 'b', 'c', 'st', 'th', 're', 'an', 'lo'),
                       ' story ', seq),
           REPEAT(CONCAT('Body of story ', seq, '. '), 20), CONCAT('author', seq % 97)
    FROM seq_1_to_2000;
INSERT INTO comments
    SELECT seq, 1 + seq % 2000, CONCAT('reader', seq % 131), REPEAT('A comment. ', 10)
    FROM seq_1_to_20000;
CREATE USER 'stack'@'%' IDENTIFIED BY 'stack';
GRANT SELECT ON stack.* TO 'stack'@'%';
